"""What `Chronicle.stream` returns: the live events of one run, and the run's end when the reader leaves.

An async generator would do the iterating, but not the leaving: a program that breaks out of
`async for` leaves the generator to the event loop's finaliser, which cancels the run whenever it
gets to it. Until then the turn went on holding the session, so the program's next `run` on it was
queued behind a turn no one would finish, and a `Chronicle` closed meanwhile left the cancelled turn
half recorded (a tool `Started`, never ended). This object cancels the run the moment the reader lets
go of it (`break`, an exception, `aclose()`), and the run records the cancel as a Ctrl-C's is.
"""

from __future__ import annotations

import asyncio
import threading
from typing import TYPE_CHECKING, Any, Awaitable, Callable

if TYPE_CHECKING:
    from chronicle.runtime.live import LiveEvent

    from .results import RunResult

#: Starts the run, handing each live event to the callable it is given.
Start = Callable[[Callable[[Any], None]], Awaitable[Any]]


class EventStream:
    """`async for event in chronicle.stream(...)`: each live event as a pydantic model, in order; the run's
    error, if it ends with one, is raised after the events it produced. Nothing runs until the first event is
    asked for."""

    def __init__(self, start: Start, let_go: Callable[["asyncio.Task[Any]"], None] = lambda task: None) -> None:
        self._start = start
        #: Told of the run's task when this stream cancels it (the Chronicle waits for such a turn to end).
        self._let_go = let_go
        self._events: asyncio.Queue[LiveEvent] = asyncio.Queue()
        self._task: asyncio.Task[Any] | None = None
        self._thread = threading.get_ident()

    def __aiter__(self) -> "EventStream":
        return self

    async def __anext__(self) -> LiveEvent:
        """The next live event: one of the models of chronicle.runtime.live (`LiveEvent`, a union tagged by `type`)."""
        if self._task is None:
            self._task = asyncio.ensure_future(self._start(self._events.put_nowait))
            self._thread = threading.get_ident()
        task = self._task
        while self._events.empty():
            if task.done():
                if task.cancelled():  # this stream's or its Chronicle's cancel (a close), recorded: the run is over
                    raise StopAsyncIteration
                task.result()  # the run's error, after every event it produced
                raise StopAsyncIteration
            getter = asyncio.ensure_future(self._events.get())
            try:
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            except asyncio.CancelledError:  # the reader's own task is cancelled: the run ends with it
                getter.cancel()
                await self.aclose()
                raise
            if getter.done():
                return getter.result()
            getter.cancel()
        return self._events.get_nowait()

    @property
    def result(self) -> "RunResult":
        """The run's RunResult, what `run` would have returned (its status, text, exit code, the approval it waits
        for), once the `async for` has ended: a program reads how the run ended without parsing `turn_end`.
        ChronicleError (code 2) before the end, or after a reader let go of the stream (the run was cancelled)."""
        from .errors import ChronicleError

        task = self._task
        if task is None or not task.done():
            raise ChronicleError("the stream's result is known once its `async for` has ended; read the stream to its end "
                                 "first", 2)
        if task.cancelled():
            raise ChronicleError("this stream was let go of before its end (break, an exception, aclose, its Chronicle "
                                 "closed), so its run was cancelled and returned no result", 2)
        return task.result()  # type: ignore[no-any-return]

    async def aclose(self) -> None:
        """End the run now if it is still going (recorded as a cancel) and wait until it has recorded that."""
        task = self._task
        if task is not None and not task.done():
            self._let_go(task)
            task.cancel()
            await asyncio.wait({task})

    def __del__(self) -> None:
        # The reader let go (`break` drops the last reference at once): the run is cancelled now, not when the
        # collector or the loop's shutdown gets to it. Cancelling is the loop thread's business.
        task = getattr(self, "_task", None)
        if task is None or task.done():
            return
        loop = task.get_loop()
        if loop.is_closed():
            return
        self._let_go(task)
        if threading.get_ident() == self._thread:
            task.cancel()
        else:
            loop.call_soon_threadsafe(task.cancel)
