"""`answer(session, input_id)`: the caller whose prompt was queued behind another call's turn gets its own answer."""

from __future__ import annotations

import asyncio

import pytest

from chronicle import Agent, Chronicle, ChronicleError, tool
from tests.helpers import response, text, tool_use, write_script


@tool(requires_approval=True)
def launch(target: str) -> str:
    """Launch at a target."""
    return f"launched {target}"


def test_a_second_caller_queued_behind_a_running_turn_awaits_its_own_answer(db_url, workspace, tmp_path):
    """Two users of one session at once, as a chat backend serves them: the second `run` comes back `queued` (the
    first call runs its prompt next), and `answer_async` returns that turn's answer for the second caller."""
    gate = tmp_path / "gate"
    script = write_script(tmp_path / "s.json", [  # one list of responses per turn
        [response(text("first answer"), started_file=str(tmp_path / "started"), until_file=str(gate))],
        [response(text("second answer"))],
    ])
    agent = Agent(tools=[], provider=f"scripted:{script}")

    async def main() -> None:
        async with Chronicle(db_url) as app:
            first = asyncio.create_task(app.run(agent, "one", workspace=workspace))
            while not (tmp_path / "started").exists():
                await asyncio.sleep(0.05)
            sid = next(row["session_id"] for row in app.sessions())
            second = await app.run(agent, "two", session=sid, workspace=workspace)
            assert second.status == "queued" and second.input_queued and second.input_id
            waiting = asyncio.create_task(app.answer_async(sid, second.input_id, poll=0.05))
            await asyncio.sleep(0.3)
            assert not waiting.done()  # its turn has not run: the first call's turn is still at its gate
            gate.touch()
            mine = await waiting
            assert (mine.status, mine.text, mine.exit_code, mine.input_id) == ("completed", "second answer", 0, second.input_id)
            assert [a.input_id for a in mine.answered] == [second.input_id]
            theirs = await first
            assert theirs.text == "first answer"
            assert (await app.answer_async(sid, theirs.input_id)).text == "first answer"  # an answered input: at once

    asyncio.run(main())


def test_an_input_behind_an_approval_or_past_its_wait_is_said_queued_and_an_unknown_one_refused(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(tool_use("tu_1", "launch", target="moon")), response(text("done"))],
                                                [response(text("second"))]])
    agent = Agent(tools=[launch], provider=f"scripted:{script}")
    with Chronicle(sqlite_url) as app:
        paused = app.run_sync(agent, "launch it", workspace=workspace)
        assert paused.status == "awaiting_approval"
        assert app.answer(paused.session_id, paused.input_id).status == "awaiting_approval"
        queued = app.submit(agent, "and then?", session=paused.session_id)
        stuck = app.answer(paused.session_id, queued["input_id"])
        assert (stuck.status, stuck.input_queued, stuck.exit_code) == ("queued", True, 0)
        assert "waits for an approval: approve or deny it, then resume(session) runs both" in (stuck.reason or "")
        app.approve(paused.session_id)
        assert app.resume(paused.session_id).status == "completed"
        assert app.answer(paused.session_id, queued["input_id"]).text == "second"
        later = app.submit(agent, "and now?", session=paused.session_id)  # no worker, nothing running it: a bound
        waited = app.answer(paused.session_id, later["input_id"], timeout_s=0.3, poll=0.05)
        assert waited.status == "queued" and "not answered within 0.3 s" in (waited.reason or "")
        with pytest.raises(ChronicleError) as unknown:
            app.answer(paused.session_id, "no-such-input")
        assert unknown.value.code == 2 and "has no input 'no-such-input'" in str(unknown.value)
        resumed = app.resume(paused.session_id)  # records no input: its result's input_id is None, as typed
        assert resumed.input_id is None
        with pytest.raises(ChronicleError) as none:
            app.answer(paused.session_id, resumed.input_id)
        assert none.value.code == 2 and str(none.value).startswith("answer(): input_id is None: that result recorded no input")
