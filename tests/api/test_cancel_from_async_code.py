"""`cancel` from async code: the turn it cancels may run on the same event loop.

`Chronicle.cancel(sid)` waits up to `wait_s` (10 s) for the turn to end. Called inside `async with Chronicle(...)`,
that wait blocked the loop, so a turn this program ran in another task could not see the cancel until the wait was
over: the program froze ten seconds and got `requested`, and the turn was cancelled only afterwards. As the other
blocking forms do (`run_sync`, `resume`, …), `cancel` inside a running loop is a ChronicleError code 2 naming its
coroutine twin, `cancel_async`, which waits without holding the loop.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from chronicle import Agent, Chronicle, ChronicleError, ToolContext, tool
from tests.helpers import response, text, tool_use

STARTED: dict[str, asyncio.Event] = {}
SESSIONS: list[str] = []


@tool(read_only=True)
async def watch_the_queue(ctx: ToolContext) -> str:
    """Watch the queue until something arrives (nothing does: the turn runs until it is cancelled)."""
    SESSIONS.append(ctx.session_id)
    STARTED["tool"].set()
    await asyncio.sleep(60)
    return "something arrived"


def scripted(tmp_path):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": [response(tool_use("w1", "watch_the_queue")), response(text("never"))]}}),
                    encoding="utf-8")
    return f"scripted:{path}"


async def running(app: Chronicle, agent: Agent, workspace: Path) -> tuple[asyncio.Task[Any], str]:
    """The agent's turn started in a task of this loop, once its tool runs: (the task, its session)."""
    STARTED["tool"] = asyncio.Event()
    turn = asyncio.create_task(app.run(agent, "watch the queue", workspace=str(workspace)))
    await asyncio.wait_for(STARTED["tool"].wait(), 30)
    return turn, SESSIONS[-1]


def test_a_turn_running_on_the_loop_is_cancelled_promptly_by_cancel_async(db_url, workspace, tmp_path):
    SESSIONS.clear()
    agent = Agent(tools=[watch_the_queue], provider=scripted(tmp_path))

    async def program():
        async with Chronicle(db_url) as app:
            turn, sid = await running(app, agent, workspace)

            # The blocking form would hold this loop for its whole wait: refused, naming the twin, nothing recorded.
            began = time.monotonic()
            with pytest.raises(ChronicleError) as told:
                app.cancel(sid)
            assert time.monotonic() - began < 1
            assert told.value.code == 2 and "await cancel_async(" in str(told.value)
            assert not [e for e in app.log(sid) if e["event"] == "CancelRequested"]

            began = time.monotonic()
            answered = await app.cancel_async(sid)
            took = time.monotonic() - began
            result = await asyncio.wait_for(turn, 10)
            return app.log(sid), answered, took, result

    log, answered, took, result = asyncio.run(program())
    assert answered["status"] == "cancelled" and took < 5  # the turn saw the cancel while the call waited
    assert result.status == "cancelled"
    events = [(e["aggregate"], e["event"]) for e in log]
    asked = events.index(("session", "CancelRequested"))
    assert ("tool_call", "Cancelled") in events[asked:] and events[-1] == ("turn", "Cancelled")


def test_cancel_without_a_wait_is_taken_inside_the_loop(db_url, workspace, tmp_path):
    """`wait_s=0` only records the request: nothing blocks, so it is not refused; the turn then ends on its own."""
    SESSIONS.clear()
    agent = Agent(tools=[watch_the_queue], provider=scripted(tmp_path))

    async def program():
        async with Chronicle(db_url) as app:
            turn, sid = await running(app, agent, workspace)
            requested = app.cancel(sid, wait_s=0)
            return requested, await asyncio.wait_for(turn, 10)

    requested, result = asyncio.run(program())
    assert requested["status"] == "requested" and result.status == "cancelled"
