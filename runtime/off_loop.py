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
import os
import queue
import threading
from typing import Any, Callable, TypeVar

T = TypeVar("T")

#: Seconds an idle thread waits for the next call before it ends.
IDLE_S = 30.0

_lock = threading.Lock()
#: A call returns how to announce its outcome, which its thread does once it is idle again.
_calls: queue.SimpleQueue[Callable[[], Callable[[], None]]] = queue.SimpleQueue()
#: Threads waiting for a call, less the calls already queued for them.
_idle = 0


def _forget_threads() -> None:
    """In a forked child the parent's threads do not exist: none is idle, whatever the count said."""
    global _lock, _calls, _idle
    _lock, _calls, _idle = threading.Lock(), queue.SimpleQueue(), 0


os.register_at_fork(after_in_child=_forget_threads)


async def off_the_loop(fn: Callable[..., T], *args: Any) -> T:
    """`fn(*args)` on a daemon thread (named after `fn` while it runs, for a person reading a stack
    dump), awaited; its result or its exception.

    An idle thread takes the call, else a new one starts: a call never waits behind another (a
    store call may wait out a whole retry), and a server's live streams, which make one call each
    0.2 s, do not start a thread each time."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(outcome: Callable[[], None]) -> None:
        if not done.done():
            outcome()

    def work() -> Callable[[], None]:
        threading.current_thread().name = f"chronicle-off-loop:{getattr(fn, '__qualname__', 'call')}"
        try:
            result = fn(*args)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            failure = exc
            deliver: Callable[[], None] = lambda: done.set_exception(failure)  # noqa: E731
        else:
            deliver = lambda: done.set_result(result)  # noqa: E731

        def announce() -> None:
            with contextlib.suppress(RuntimeError):  # the loop closed while this ran: nobody is waiting
                loop.call_soon_threadsafe(settle, deliver)

        return announce

    _submit(work)
    return await done


def _submit(call: Callable[[], Callable[[], None]]) -> None:
    global _idle
    with _lock:
        if _idle > 0:
            _idle -= 1
            _calls.put(call)
            return
    threading.Thread(target=_serve, args=(call,), name="chronicle-off-loop", daemon=True).start()


def _serve(call: Callable[[], Callable[[], None]]) -> None:
    """Run `call`, then the calls handed to this thread while it is idle, until none comes for IDLE_S.
    The thread counts itself idle before it announces the outcome, so the awaiting coroutine's next
    call finds it rather than starting another."""
    global _idle
    while True:
        announce = call()
        threading.current_thread().name = "chronicle-off-loop:idle"
        with _lock:
            _idle += 1
        announce()
        try:
            call = _calls.get(timeout=IDLE_S)
        except queue.Empty:
            with _lock:
                try:  # a call queued for an idle thread just as this one timed out: take it
                    call = _calls.get_nowait()
                except queue.Empty:
                    _idle -= 1
                    return
