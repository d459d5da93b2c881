"""A sync tool function runs in a thread, and Python cannot stop a thread.

A cancel or a timeout stops the turn waiting for the function, not the function: it runs on and
may still complete its effects (charge the card, send the mail) seconds later. So the runner must
not record such a call as if it had been stopped. `run_in_thread` runs the function through a
`ThreadRun`, which the runner asks, when it gives up waiting, whether the function is running
(`abandon`): if it never started it never will, and the call is cancelled like any other; if it
did, the call's result says it could not be stopped, and the runner hands `when_ended` what to
record once the function ends (ToolCall.FinishedAfterAbandon, runtime/tool_runner.py).

An async tool is cancelled for real (its coroutine gets CancelledError), and a subprocess is
killed with its process group (runtime/tools/shell.py): neither goes through here.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from dataclasses import dataclass
from time import monotonic
from typing import Any, Callable

from .base import ToolContext, ToolError

#: Where a tool's ThreadRun is kept in its context's extras while it runs.
THREAD_KEY = "thread"
#: A sync tool function's thread is named this, then the tool's name (what a stack dump shows).
TOOL_THREAD_PREFIX = "chronicle-tool:"


def left_running_note(name: str) -> str:
    """What a cancelled or timed-out call's result adds when its function ran on."""
    return (f"{name} could not be stopped (a sync Python function runs in a thread, which cannot be interrupted): "
            "it may still be running and may still complete its effects")


@dataclass(frozen=True)
class LateEnd:
    """How a function left running ended: whether it raised, its result or error as text, how long it ran."""

    raised: bool
    output: str
    duration_ms: float


class ThreadRun:
    """One run of a sync function in a thread: waiting for a thread, running, ended — or skipped,
    when the wait was given up before the thread took it. Called from both the event loop's thread
    and the function's, so every change is made under a lock. Its result is described as text only
    for a listener: a run nobody gave up on costs no second rendering of its result."""

    def __init__(self, name: str, describe: Callable[[Any], str]) -> None:
        self.name = name
        self._describe = describe
        self._lock = threading.Lock()
        self._state = "waiting"
        self._started = 0.0
        self._end: tuple[bool, Any, float] | None = None
        self._listener: Callable[[LateEnd], None] | None = None

    def begin(self) -> bool:
        """In the thread, before the function: False if the wait was already given up (do not run it)."""
        with self._lock:
            if self._state == "skipped":
                return False
            self._state, self._started = "running", monotonic()
            return True

    def end(self, raised: bool, value: Any) -> None:
        """In the thread, after the function (`value`: its result or its exception); handed to the
        listener if one waits for it."""
        with self._lock:
            self._state = "ended"
            self._end = (raised, value, round((monotonic() - self._started) * 1000, 3))
            listener, end = self._listener, self._end
        if listener is not None:
            listener(self._late(*end))

    def abandon(self) -> bool:
        """The runner stops waiting. True if the function runs (or ran) anyway: it cannot be stopped."""
        with self._lock:
            if self._state == "waiting":
                self._state = "skipped"
                return False
            return True

    def when_ended(self, listener: Callable[[LateEnd], None]) -> None:
        """Call `listener` with the function's end: now if it has ended, else in its thread when it does.
        Given once the call's own end is stored, so the late end is recorded after it."""
        with self._lock:
            self._listener, end = listener, self._end
        if end is not None:
            listener(self._late(*end))

    def _late(self, raised: bool, value: Any, duration_ms: float) -> LateEnd:
        """The end as text, an exception as the runner words a tool's (ToolError: its message)."""
        if raised:
            return LateEnd(True, str(value) if isinstance(value, ToolError) else raised_text(self.name, value), duration_ms)
        try:
            text = self._describe(value)
        except Exception as exc:  # noqa: BLE001 - a result the awaiting side would have refused too
            text = f"{self.name} returned a result that cannot be shown ({type(exc).__name__}: {exc})"
        return LateEnd(False, text, duration_ms)


def raised_text(name: str, exc: BaseException) -> str:
    """A tool's exception as its error result says it; sys.exit (argparse's too) is a call, not a crash of the program."""
    if isinstance(exc, SystemExit):
        return f"{name} called sys.exit({'' if exc.code is None else repr(exc.code)})"
    return f"{name} raised {type(exc).__name__}: {exc}"


class OwedEnd:
    """A late end owed to a store: registered once its function runs on past its call's end, gone once recorded.

    Closing the store under a function still running lost its late end (the recording found the pool closed,
    logged a traceback, and the log went on saying the effect may not have happened when it had). So whoever
    closes a store first waits for what is owed to it (`wait_for_late_ends`); one given up on records nothing."""

    def __init__(self, store: Any, name: str, call_id: Any) -> None:
        self.store, self.name, self.call_id = store, name, call_id
        self.state = "waiting"  # -> "recording" -> settled, or "given up"


_owed_changed = threading.Condition()
_owed: list[OwedEnd] = []


def owe_late_end(store: Any, name: str, call_id: Any) -> OwedEnd:
    with _owed_changed:
        owed = OwedEnd(store, name, call_id)
        _owed.append(owed)
        return owed


def start_recording(owed: OwedEnd) -> bool:
    """False when the store's closer gave up on it (and said so): record nothing, log nothing."""
    with _owed_changed:
        if owed.state == "given up":
            return False
        owed.state = "recording"
        return True


def settled(owed: OwedEnd) -> None:
    with _owed_changed:
        if owed in _owed:
            _owed.remove(owed)
        _owed_changed.notify_all()


def owed_to(store: Any) -> bool:
    with _owed_changed:
        return any(owed.store is store for owed in _owed)


def wait_for_late_ends(store: Any, timeout_s: float) -> list[OwedEnd]:
    """Wait up to `timeout_s` for the late ends owed to `store` to be recorded; those still waiting then are
    given up on (returned, for one line saying so). One being recorded is waited for past the cap: its write
    is under way, and closing the store under it is what this prevents."""
    deadline = monotonic() + timeout_s
    with _owed_changed:
        while True:
            mine = [owed for owed in _owed if owed.store is store]
            if not mine:
                return []
            left = deadline - monotonic()
            if left <= 0 and all(owed.state == "waiting" for owed in mine):
                for owed in mine:
                    owed.state = "given up"
                    _owed.remove(owed)
                return mine
            _owed_changed.wait(left if left > 0 else 0.05)


def given_up_line(given_up: list[OwedEnd], waited_s: float) -> str:
    """One line for what the store closed without: no traceback, since nothing failed but the wait."""
    calls = ", ".join(f"{owed.call_id} ({owed.name})" for owed in given_up)
    many = len(given_up) > 1
    return (f"store closed without the late end{'s' if many else ''} of tool call{'s' if many else ''} {calls}: "
            f"{'their functions' if many else 'its function'}, left running by a cancel or a timeout, still ran "
            f"{waited_s:g} s after the close began; not recorded (they may still complete their effects)")


async def run_in_thread(ctx: ToolContext, name: str, fn: Callable[..., Any], kwargs: dict[str, Any],
                        describe: Callable[[Any], str]) -> Any:
    """`fn(**kwargs)` in a thread of its own, awaited, in a copy of the caller's context (as `asyncio.to_thread`
    runs it); its ThreadRun is kept in `ctx.extras` for the runner. `describe` turns the result into the text
    a late end records.

    Not in the event loop's executor: closing a loop joins that executor's threads (`asyncio.run`, and the
    `asyncio.Runner` of every blocking library call), so `run_sync` returned, and Ctrl-C's KeyboardInterrupt
    came, only once a function its turn had given up on ended, however long after the turn. The thread is not
    a daemon: a process still waits for its tool threads before it exits, and their late ends are recorded."""
    run = ThreadRun(name, describe)
    ctx.extras[THREAD_KEY] = run
    loop = asyncio.get_running_loop()
    done: asyncio.Future[Any] = loop.create_future()
    context = contextvars.copy_context()

    def settle(deliver: Callable[[], None]) -> None:
        if not done.done():  # the turn gave up waiting (a cancel): nobody reads it
            deliver()

    def work() -> None:
        if not run.begin():
            return  # nobody waits for it any more, and it never started: it never runs
        try:
            result = context.run(fn, **kwargs)
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine, as to_thread hands it
            run.end(True, exc)
            failure = exc
            deliver: Callable[[], None] = lambda: done.set_exception(failure)  # noqa: E731
        else:
            run.end(False, result)
            deliver = lambda: done.set_result(result)  # noqa: E731
        with contextlib.suppress(RuntimeError):  # its loop closed once its turn ended: nobody is waiting
            loop.call_soon_threadsafe(settle, deliver)

    threading.Thread(target=work, name=f"{TOOL_THREAD_PREFIX}{name}", daemon=False).start()
    return await done


def abandoned(ctx: ToolContext) -> ThreadRun | None:
    """After a cancel or a timeout: the tool's thread if its function runs on, else None (it was an
    async tool, a subprocess, or a function that never started)."""
    run = ctx.extras.get(THREAD_KEY)
    return run if isinstance(run, ThreadRun) and run.abandon() else None
