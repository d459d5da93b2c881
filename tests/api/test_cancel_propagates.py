"""A cancel of the task awaiting `Chronicle.run` cancels the turn, records the cancel, and then reaches the caller as
asyncio promises: `wait_for` raises TimeoutError, an `asyncio.timeout` block raises TimeoutError (the code after the
run in it does not run), a cancelled task raises CancelledError. The turn runs in a task of its own, which recorded
the cancel and answered with a `cancelled` result, and that result used to come back as if the caller's task had not
been cancelled at all. The cancels that are the turn's own business (`cancel_async`, a stream let go of) still end
with the turn's answer: tests/api/test_cancel_from_async_code.py and test_stream_left_early.py."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Awaitable, Callable

import pytest

from chronicle import Agent, Chronicle, ToolContext, tool
from tests.helpers import response, text, tool_use

#: Set by the tool once it runs: a cancel after it finds the turn recorded and a tool call to cancel.
RUNNING: dict[str, asyncio.Event] = {}
SESSIONS: list[str] = []
#: What runs when the tool starts (an `asyncio.timeout` made due at once); None: nothing.
ON_START: list[Callable[[], None]] = []


@tool(read_only=True)
async def watch_the_door(ctx: ToolContext) -> str:
    """Watch the door until someone comes (nobody does: the turn runs until it is cancelled)."""
    SESSIONS.append(ctx.session_id)
    RUNNING["tool"].set()
    for start in ON_START:
        start()
    await asyncio.sleep(60)
    return "someone came"


def agent(tmp_path: Path) -> Agent:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": [response(tool_use("w1", "watch_the_door")), response(text("never"))]}}),
                    encoding="utf-8")
    return Agent(tools=[watch_the_door], provider=f"scripted:{path}")


def cancels_recorded(db_url: str, sid: str) -> tuple[list[tuple[str, str]], str]:
    with Chronicle(db_url) as app:
        ends = [(e["aggregate"], e["event"]) for e in app.log(sid) if e["event"] in ("Cancelled", "Completed", "Failed")]
        [row] = [r for r in app.sessions() if r["session_id"] == sid]
        return ends, row["status"]


async def with_wait_for(app: Chronicle, run: Callable[[], Awaitable[Any]], after: list[str]) -> None:
    # wait_for cannot be made due from inside the tool: its timeout is long enough for the turn to reach the tool
    await asyncio.wait_for(run(), 3)
    after.append("went on")


async def with_timeout(app: Chronicle, run: Callable[[], Awaitable[Any]], after: list[str]) -> None:
    async with asyncio.timeout(None) as due:
        ON_START.append(lambda: due.reschedule(asyncio.get_running_loop().time()))  # due the moment the tool runs
        await run()
        after.append("went on inside the block")
    after.append("went on")


async def with_task_cancel(app: Chronicle, run: Callable[[], Awaitable[Any]], after: list[str]) -> None:
    task = asyncio.ensure_future(run())
    await asyncio.wait_for(RUNNING["tool"].wait(), 30)
    task.cancel()
    await task
    after.append("went on")


@pytest.mark.parametrize(("form", "raised"), [
    (with_wait_for, TimeoutError), (with_timeout, TimeoutError), (with_task_cancel, asyncio.CancelledError),
], ids=["wait_for", "timeout", "task.cancel"])
def test_a_cancel_of_the_caller_is_recorded_then_raised(form, raised, db_url, workspace, tmp_path):
    RUNNING["tool"] = asyncio.Event()
    SESSIONS.clear(), ON_START.clear()
    after: list[str] = []
    the_agent = agent(tmp_path)

    async def program() -> None:
        RUNNING["tool"] = asyncio.Event()  # of this loop
        async with Chronicle(db_url) as app:
            await form(app, lambda: app.run(the_agent, "watch", workspace=str(workspace)), after)

    with pytest.raises(raised):
        asyncio.run(program())
    assert after == [], "the code after the cancelled run did not run"
    assert RUNNING["tool"].is_set(), "the cancel came while the tool ran"
    ends, status = cancels_recorded(db_url, SESSIONS[-1])
    assert ends == [("tool_call", "Cancelled"), ("turn", "Cancelled")] and status == "idle"


def test_a_stream_whose_chronicle_closes_under_it_ends_after_the_cancel_it_records(db_url, workspace, tmp_path):
    """The Chronicle's own cancel (its `async with` ending while a reader still reads a stream in another task) is
    not the reader's: the reader gets the events up to the turn's cancelled end, then the stream ends, rather than a
    CancelledError in a task nobody cancelled."""
    SESSIONS.clear(), ON_START.clear()
    the_agent = agent(tmp_path)

    async def program() -> list[Any]:
        RUNNING["tool"] = asyncio.Event()
        async with Chronicle(db_url) as app:
            async def read() -> list[Any]:
                return [event async for event in app.stream(the_agent, "watch", workspace=str(workspace))]

            reader = asyncio.create_task(read())
            await asyncio.wait_for(RUNNING["tool"].wait(), 30)
        return await asyncio.wait_for(reader, 30)

    events = asyncio.run(program())
    ends = [(e.type, e.status) for e in events if e.type in ("tool_end", "turn_end")]
    assert ends == [("tool_end", "cancelled"), ("turn_end", "cancelled")]
    ends, status = cancels_recorded(db_url, SESSIONS[-1])
    assert ends == [("tool_call", "Cancelled"), ("turn", "Cancelled")] and status == "idle"


def test_a_cancel_of_the_task_awaiting_resume_async_is_recorded_then_raised(db_url, workspace, tmp_path):
    SESSIONS.clear(), ON_START.clear()
    the_agent = agent(tmp_path)

    async def program() -> str:
        RUNNING["tool"] = asyncio.Event()
        async with Chronicle(db_url) as app:
            sid = app.submit(the_agent, "watch", workspace=str(workspace))["session_id"]
            task = asyncio.ensure_future(app.resume_async(sid))
            await asyncio.wait_for(RUNNING["tool"].wait(), 30)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return sid

    sid = asyncio.run(program())
    ends, status = cancels_recorded(db_url, sid)
    assert ends == [("tool_call", "Cancelled"), ("turn", "Cancelled")] and status == "idle"
