"""runtime/tools/threads.py: what the runner learns of a sync function it stopped waiting for."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from chronicle.runtime.tools.base import ToolContext, ToolError
from chronicle.runtime.tools.threads import ThreadRun, abandoned, run_in_thread


def test_a_function_given_up_on_before_its_thread_took_it_never_runs():
    run = ThreadRun("t", str)
    assert run.abandon() is False  # it was only waiting: nothing runs on
    assert run.begin() is False


def test_a_late_end_reaches_the_listener_whether_it_comes_before_or_after_the_listener():
    ended_first, listened_first = ThreadRun("t", lambda v: f"got {v}"), ThreadRun("t", str)
    for run in (ended_first, listened_first):
        assert run.begin() and run.abandon() is True  # running: it cannot be stopped
    ended_first.end(False, 7)
    heard: list = []
    ended_first.when_ended(heard.append)
    listened_first.when_ended(heard.append)
    listened_first.end(True, ToolError("no such order"))
    assert [(e.raised, e.output) for e in heard] == [(False, "got 7"), (True, "no such order")]


def test_an_exception_is_worded_as_the_runner_words_a_tools_and_an_unshowable_result_is_said_so():
    heard: list = []
    for value, raised in ((ValueError("boom"), True), (object(), False)):
        run = ThreadRun("lookup", lambda v: 1 / 0)
        run.begin()
        run.when_ended(heard.append)
        run.end(raised, value)
    assert heard[0].output == "lookup raised ValueError: boom"
    assert heard[1].output.startswith("lookup returned a result that cannot be shown (ZeroDivisionError")


def test_a_cancelled_wait_leaves_the_thread_to_finish_and_to_report_its_end():
    running, release, heard = threading.Event(), threading.Event(), []
    ctx = ToolContext(workspace=Path("."))

    def slow(n: int) -> int:
        running.set()
        release.wait(5)
        return n * 2

    async def scenario():
        task = asyncio.ensure_future(run_in_thread(ctx, "slow", slow, {"n": 21}, describe=str))
        assert await asyncio.to_thread(running.wait, 5)  # its thread took it: it cannot be stopped now
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        left = abandoned(ctx)
        assert left is not None
        done = threading.Event()
        left.when_ended(lambda end: (heard.append(end), done.set()))
        release.set()
        assert await asyncio.to_thread(done.wait, 5)

    asyncio.run(scenario())
    assert [(e.raised, e.output) for e in heard] == [(False, "42")] and heard[0].duration_ms > 0
