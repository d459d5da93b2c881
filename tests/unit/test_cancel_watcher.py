"""A turn's end waits for its cancel check in flight, but never for a stalled one.

The check runs on a daemon thread (runtime/off_loop.py). Left to end on its own, a check could
still read a store that its turn's caller had closed and deleted (a replay's scratch store);
waited for without bound, a store outage would hold every turn's end for a whole connection retry.
"""

from __future__ import annotations

import asyncio
import threading
import time
from types import SimpleNamespace
from uuid import uuid4

from chronicle.runtime import controls
from chronicle.runtime.controls import CancelWatcher


class HeldCheck(CancelWatcher):
    """A watcher whose check blocks until the test lets it go (or `hold_s` passes)."""

    def __init__(self, hold_s: float) -> None:
        super().__init__(SimpleNamespace(), uuid4(), uuid4(), task=None, poll_s=0.01)  # type: ignore[arg-type]
        self.hold_s = hold_s
        self.started = threading.Event()
        self.release = threading.Event()
        self.ended = threading.Event()

    def _cancel_reason(self) -> str | None:
        self.started.set()
        self.release.wait(self.hold_s)
        self.ended.set()
        return None


async def _stop_during_a_check(watcher: HeldCheck) -> float:
    watcher.start()
    while not watcher.started.is_set():
        await asyncio.sleep(0.001)
    began = time.monotonic()
    await watcher.stop()
    return time.monotonic() - began


def test_stop_returns_after_the_check_in_flight_has_ended():
    watcher = HeldCheck(hold_s=0.15)
    asyncio.run(_stop_during_a_check(watcher))
    assert watcher.ended.is_set()  # nothing reads the store once the turn has ended


def test_stop_gives_up_on_a_check_held_longer_than_its_bound(monkeypatch):
    monkeypatch.setattr(controls, "STOP_WAIT_S", 0.1)
    watcher = HeldCheck(hold_s=30)
    waited = asyncio.run(_stop_during_a_check(watcher))
    try:
        assert not watcher.ended.is_set()  # still held: the turn's end did not wait for it
        assert waited < 5
    finally:
        watcher.release.set()
    assert watcher.ended.wait(5)


class CountedCheck(CancelWatcher):
    """A watcher that only notes when it checks."""

    def __init__(self, just_started: bool) -> None:
        super().__init__(SimpleNamespace(), uuid4(), uuid4(), task=None, poll_s=5, just_started=just_started)  # type: ignore[arg-type]
        self.checked = threading.Event()

    def _cancel_reason(self) -> str | None:
        self.checked.set()
        return None


async def _first_checks() -> tuple[bool, bool]:
    found_in_flight, just_begun = CountedCheck(just_started=False), CountedCheck(just_started=True)
    just_begun.start()
    found_in_flight.start()
    try:
        for _ in range(500):  # the in-flight turn's watcher checks at once
            if found_in_flight.checked.is_set():
                break
            await asyncio.sleep(0.01)
        return found_in_flight.checked.is_set(), just_begun.checked.is_set()
    finally:
        await found_in_flight.stop()
        await just_begun.stop()


def test_a_turn_found_in_flight_is_checked_at_once_and_one_just_begun_after_a_poll():
    """A cancel may have been recorded while no process ran a turn found in flight; a turn this
    process began a moment ago cannot have one yet, and its first check waits one poll, so its
    watcher does not ask the store while the loop is reading the earlier turns."""
    in_flight_checked, just_begun_checked = asyncio.run(_first_checks())
    assert in_flight_checked
    assert not just_begun_checked
