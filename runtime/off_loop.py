"""Blocking store calls of a turn's background tasks, kept off the event loop's thread.

A lease renewal and a cancel check are store calls made while a turn runs. On the event loop's
thread, a store outage held the whole turn for as long as eventsourcing retried each of them (ten
connection attempts, ≈ 11 s at a 1 s connect timeout), one after another: a check that fell due
while the turn's own failed write was retrying ran right after it, so `run` took three times as
long to report the lost store, and a merely slow database stalled streaming and tools.

asyncio's executor threads are joined at exit, which would hold the exit for as long as a retry
lasts; a daemon thread is not. A renewal cut short by the exit only lets the lease run out, as
a dead holder's does; a cancel check cut short belongs to a turn that has ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")


async def off_the_loop(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on a daemon thread of its own (named after `fn`, for a person reading a stack
    dump), awaited; its result or its exception."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():
            outcome()

    def work() -> None:
        try:
            result = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            failure = exc
            deliver: Callable[[], None] = lambda: done.set_exception(failure)  # noqa: E731
        else:
            deliver = lambda: done.set_result(result)  # noqa: E731
        with contextlib.suppress(RuntimeError):  # the loop closed while this ran: nobody is waiting
            loop.call_soon_threadsafe(settle, deliver)

    name = f"chronicle-off-loop:{getattr(fn, '__qualname__', 'call')}"
    threading.Thread(target=work, name=name, daemon=True).start()
    return await done
