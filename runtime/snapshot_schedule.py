"""When an aggregate's snapshot is due: every `interval` events for a Session, on a growing schedule
for a Turn.

A Turn snapshot holds the whole turn, and the store keeps only the newest (runtime/store_snapshots.py), so
a snapshot every 100 events made a long turn encode its whole history again and again: at 1,000
steps the snapshots were a tenth of each step's CPU (273 µs a step, the last ones 27 ms each, a
pause every 50 steps). Due at 1, 2, 3, 4, 6, 8, 12, 16, … times the interval (from the second
on, each at most 1.5 times the one before), what snapshots cost stays in proportion to the turn,
and a load replays at most a third of the turn's events past the newest snapshot. A turn that
ends an interval or more past its last scheduled snapshot takes one as it ends, so a finished
turn, which is what later turns' contexts and new processes load, replays fewer than `interval`
events.
"""

from __future__ import annotations

from typing import Any, Iterable
from uuid import UUID

from chronicle.domain.turn import Turn

#: A Turn's terminal events: a long turn ending far from its last snapshot takes one then.
TURN_ENDS = (Turn.Completed, Turn.Failed, Turn.Cancelled, Turn.Stopped)


def ended_turns(events: Iterable[Any]) -> set[UUID]:
    """The turns a save ends."""
    return {e.originator_id for e in events if isinstance(e, TURN_ENDS)}


def snapshot_due(aggregate: Any, version: int, interval: int, ended: set[UUID]) -> bool:
    """Whether the aggregate's state at `version` (an event of the save being made) is snapshotted:
    every `interval` events for a Session; on the schedule below for a Turn, and as it ends (one of
    `ended`, at its newest version) when that is far from its last scheduled snapshot."""
    if not isinstance(aggregate, Turn):
        return version % interval == 0
    if on_schedule(version, interval):
        return True
    return aggregate.id in ended and version == aggregate.version and due_at_end(version, interval)


def on_schedule(version: int, interval: int) -> bool:
    """Whether `version` is `interval` × 2^k or × 3·2^k."""
    if version <= 0 or version % interval:
        return False
    multiple = version // interval
    while multiple % 2 == 0:
        multiple //= 2
    return multiple in (1, 3)


def last_scheduled(version: int, interval: int) -> int:
    """The newest version at or before `version` that `on_schedule` accepts (0 if none)."""
    multiple = version // interval
    if multiple < 1:
        return 0
    power = 1 << (multiple.bit_length() - 1)
    best = power * 3 // 2 if power >= 2 and power * 3 // 2 <= multiple else power
    return best * interval


def due_at_end(version: int, interval: int) -> bool:
    """Whether a turn that ended at `version` should be snapshotted as it ends."""
    return version - last_scheduled(version, interval) >= interval
