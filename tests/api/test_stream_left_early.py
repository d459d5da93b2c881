"""A program that stops reading `Chronicle.stream`, or closes its Chronicle while a turn runs in a task of its own:
the turn is cancelled and the cancel recorded, the session is free for the next turn, and nothing is left half
written. (A stream used to be an async generator the event loop finalised whenever it got to it: the next `run` on
the session was queued for no one, and a close meanwhile left a tool `Started` and never ended.)"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from chronicle import Agent, Chronicle
from tests.helpers import response, text, tool_use

GATE = "while [ ! -f never ]; do sleep 0.05; done"


def gated_agent(tmp_path: Path) -> Agent:
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [
        [response(tool_use("b", "bash", command=GATE)), response(text("never reached"))],
        [response(text("second answer"))],
    ]}}), encoding="utf-8")
    return Agent(tools=["bash"], provider=f"scripted:{script}")


def ends(app: Chronicle, sid: str) -> list[tuple[str, str]]:
    return [(e["aggregate"], e["event"]) for e in app.log(sid) if e["event"] in ("Cancelled", "Completed", "Failed")]


def test_breaking_out_of_a_stream_cancels_the_turn_at_once_and_the_next_run_on_the_session_runs(db_url, workspace, tmp_path):
    agent = gated_agent(tmp_path)

    async def scenario() -> tuple[str, str, str]:
        with Chronicle(db_url) as app:
            sid = ""
            async for event in app.stream(agent, "wait", workspace=str(workspace), auto_approve=True):
                sid = event.session_id
                if event.type == "tool_start":
                    break
            result = await asyncio.wait_for(app.run(agent, "and now?", session=sid, workspace=str(workspace)), 60)
            return sid, result.status, result.text

    sid, status, answer = asyncio.run(scenario())
    assert (status, answer) == ("completed", "second answer"), "run, not queued behind the turn left"
    with Chronicle(db_url) as app:
        assert ends(app, sid) == [("tool_call", "Cancelled"), ("turn", "Cancelled"), ("turn", "Completed")]
        assert app.verify(sid)["ok"]


def test_aclose_waits_until_the_cancel_is_recorded(db_url, workspace, tmp_path):
    agent = gated_agent(tmp_path)

    async def scenario() -> str:
        with Chronicle(db_url) as app:
            events = app.stream(agent, "wait", workspace=str(workspace), auto_approve=True)
            sid = ""
            async for event in events:
                sid = event.session_id
                if event.type == "tool_start":
                    break
            await events.aclose()
            assert ends(app, sid) == [("tool_call", "Cancelled"), ("turn", "Cancelled")]
            return sid

    sid = asyncio.run(scenario())
    with Chronicle(db_url) as app:
        assert app.sessions()[0]["status"] == "idle" and app.sessions()[0]["session_id"] == sid


def test_closing_a_chronicle_under_a_turn_left_running_cancels_it_and_records_the_cancel_whole(db_url, workspace, tmp_path):
    agent = gated_agent(tmp_path)

    async def scenario(use_async_with: bool) -> asyncio.Task:
        going = asyncio.Event()

        def seen(event) -> None:  # type: ignore[no-untyped-def]
            if event.type == "tool_start":
                going.set()

        if use_async_with:
            async with Chronicle(db_url) as app:
                task = asyncio.ensure_future(app.run(agent, "wait", workspace=str(workspace), auto_approve=True, on_event=seen))
                await asyncio.wait_for(going.wait(), 60)
            assert task.done(), "`async with` ends once the cancel is recorded"
        else:
            with Chronicle(db_url) as app:
                task = asyncio.ensure_future(app.run(agent, "wait", workspace=str(workspace), auto_approve=True, on_event=seen))
                await asyncio.wait_for(going.wait(), 60)
            await asyncio.wait({task}, timeout=60)  # the store closes once the cancel is recorded
        return task

    for use_async_with in (True, False):
        task = asyncio.run(scenario(use_async_with))
        # Cancelled inside the turn, the run answers with the cancel it recorded; caught between its steps, it is cancelled
        assert task.cancelled() or (task.result().status, task.result().exit_code) == ("cancelled", 130)
    with Chronicle(db_url) as app:
        sids = [row["session_id"] for row in app.sessions()]
        assert len(sids) == 2
        for sid in sids:
            assert ends(app, sid) == [("tool_call", "Cancelled"), ("turn", "Cancelled")]
            assert app.sessions()[0]["status"] == "idle"
            assert app.verify(sid)["ok"]
