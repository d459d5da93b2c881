"""The turns a `Chronicle` is running in asyncio tasks, so that closing it or continuing a session finds them.

A program may leave a turn running in a task of its own: a `stream` not read to its end, a `run` wrapped in
`create_task` and not awaited. Closing the store under it made the turn's next save fail with the pool
closed, leaving its log cut off mid-step; and a `run` on the session just after a stream was let go of found
the cancelled turn still holding the session, so its prompt was queued for no one.
"""

from __future__ import annotations

import asyncio
import weakref
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator, TypeVar
from uuid import UUID

T = TypeVar("T")


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def caller_cancels() -> Callable[[], None]:
    """Called as a coroutine starts: what it calls once its turns have run, to raise its caller's cancel.

    A turn runs in a task of its own (runtime/app/running.py's `run_one`), so that what cancels the turn (a signal
    in the CLI, a `cancel` request, a middleware's timeout) ends the turn and not the caller. A cancel of the
    caller's own task (`asyncio.wait_for`, `asyncio.timeout`, a TaskGroup, `task.cancel()`, Ctrl-C in `run_sync`)
    reaches the turn through the await too, and the turn records it and returns, as it should; but the caller's
    task was then never told: `wait_for` returned a `cancelled` result instead of raising TimeoutError, and the
    code after an `asyncio.timeout` block ran on. Its cancel count says whether it was cancelled meanwhile."""
    task = asyncio.current_task()
    before = task.cancelling() if task is not None else 0

    def propagate() -> None:
        if task is not None and task.cancelling() > before:
            raise asyncio.CancelledError
    return propagate


async def in_own_task(work: Awaitable[T]) -> T:
    """`work`, which runs turns, in a task of its own, as `run` runs its turns (runtime/app/running.py's `run_one`).

    The loop takes a cancel that reaches its turn as the turn's end: it records it and un-cancels the task it runs
    in, so the turn's outcome can be returned. Run in the caller's own task, that swallowed the caller's cancel
    itself (`resume_async` under `wait_for` returned a `cancelled` result): in a task of its own, the caller's task
    keeps its cancel, which `caller_cancels` then raises."""
    return await asyncio.ensure_future(work)


class RunningTurns:
    """Each task driving a turn of this Chronicle, with the session it drives."""

    def __init__(self) -> None:
        self._tasks: dict[asyncio.Task[Any], UUID] = {}
        #: Tasks a stream cancelled as its reader let go: ending, though they may have taken the cancel in already.
        self._let_go: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()

    def let_go(self, task: asyncio.Task[Any]) -> None:
        self._let_go.add(task)

    @contextmanager
    def running(self, session_id: UUID) -> Iterator[None]:
        task = asyncio.current_task()
        if task is None:  # pragma: no cover - `run` is a coroutine: there is always a task
            yield
            return
        self._tasks[task] = session_id
        try:
            yield
        finally:
            self._tasks.pop(task, None)

    def _live(self) -> list[asyncio.Task[Any]]:
        """Tasks still going on a loop that runs them (a task on a stopped loop will never record anything)."""
        return [t for t in list(self._tasks) if not t.done() and t.get_loop().is_running()]

    def _ending(self, task: asyncio.Task[Any]) -> bool:
        return bool(task.cancelling()) or task in self._let_go

    def ending(self) -> bool:
        """Whether a turn of this Chronicle is being cancelled (so `run` looks at which session it holds)."""
        return any(self._ending(t) for t in self._live())

    async def cancelled_ones_ended(self, session_id: UUID) -> None:
        """Wait for this Chronicle's cancelled turns of `session_id` (a stream just let go of) to record their cancel,
        so the session is free for the next turn rather than busy with one that is ending."""
        here, me = asyncio.get_running_loop(), asyncio.current_task()
        ending = [t for t in self._live() if self._tasks.get(t) == session_id and t is not me
                  and t.get_loop() is here and self._ending(t)]
        if ending:
            await asyncio.wait(ending)

    async def cancelled_and_ended(self) -> None:
        """Cancel every turn still running in this loop and wait until each has recorded its cancel."""
        here, me = asyncio.get_running_loop(), asyncio.current_task()
        going = [t for t in self._live() if t is not me and t.get_loop() is here]
        for task in going:
            task.cancel()
        if going:
            await asyncio.wait(going)

    def cancel_then(self, close: Callable[[], None]) -> None:
        """Cancel the turns still running, then `close` once they have ended (at once when none runs)."""
        going = self._live()
        if not going:
            close()
            return
        left = set(going)

        def ended(task: asyncio.Task[Any]) -> None:
            left.discard(task)
            if not left:
                close()

        for task in going:
            loop = task.get_loop()

            def cancel(task: asyncio.Task[Any] = task) -> None:
                task.add_done_callback(ended)
                task.cancel()

            if _running_loop() is loop:
                cancel()
            else:  # closed from another thread: the task's loop does the cancelling
                loop.call_soon_threadsafe(cancel)
