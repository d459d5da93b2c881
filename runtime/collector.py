"""When Python's cyclic garbage collector runs: held off while a large JSON document becomes
Python values, and kept out of a CLI command's start-up.

The collector starts a young-generation collection every 700 container allocations, and every
tenth of those an older one; every hundredth walks every object the process holds. Neither a
JSON parse nor importing a command's modules makes reference cycles worth finding, yet both
allocate tens of thousands of containers:
- `history --at` at 1,000 steps parses 450 KB of wire JSON: 1.3 ms on average and 15 ms when a
  full collection fell in it, against 0.9 ms with the collector held off;
- the same command from the CLI spent 45–55 ms of its 400 in collections, most of them walking
  the modules it had just imported (120 young, 11 middle, 1 full collection).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

#: Young-generation threshold while a CLI command starts: no collection in the start-up of a read
#: command (a few hundred thousand allocations at most), yet a command that never says its
#: start-up is over (`start_up_done`) is still collected, as a server must be.
START_UP_THRESHOLD = 200_000

#: The thresholds `hold_for_start_up` replaced, until `start_up_done` puts them back.
_held: tuple[int, ...] | None = None


@contextmanager
def collector_held() -> Iterator[None]:
    """Hold the collector off for the block, and turn it back on after only if it was on: a program
    that turned it off itself keeps it off. The switch is the process's, not the thread's: another
    thread's allocations meanwhile are not collected either, for as long as one parse takes. What
    the block allocated still counts: one young collection may follow it, instead of dozens in it."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def hold_for_start_up() -> None:
    """The CLI's first step: collect rarely until the command's modules are imported and its store
    is open. A library user's program never calls this: its collector is its own."""
    global _held
    if _held is None:
        _held = gc.get_threshold()
        gc.set_threshold(START_UP_THRESHOLD, *_held[1:])


def start_up_done() -> None:
    """Called by the CLI once the store is open: what start-up made (modules, classes, the store)
    lives as long as the process, so it moves to the collector's permanent generation, which no
    collection walks, and the usual thresholds return for the command's own work. Nothing when
    `hold_for_start_up` was not called, or after the first call."""
    global _held
    if _held is None:
        return
    gc.freeze()
    gc.set_threshold(*_held)
    _held = None
