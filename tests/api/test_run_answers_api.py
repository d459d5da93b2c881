"""Which input a run answered: a run drains the session's queue (as `chronicle run` does), so its RunResult says
which turn answered its own prompt, lists every turn it ran, and says when its prompt is still queued — on both
backends."""

from __future__ import annotations

import json
import threading
import time

from chronicle import Agent, Answered, Chronicle
from tests.helpers import response, text, tool_use


def scripted(tmp_path, turns):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": turns}}), encoding="utf-8")
    return f"scripted:{path}"


def wait_for(path, seconds=30):
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_the_first_run_answers_its_own_prompt_and_lists_the_one_queued_behind_it(db_url, workspace, tmp_path):
    gate, started = tmp_path / "gate", tmp_path / "started"
    agent = Agent(tools=[], provider=scripted(tmp_path, [  # one response list per turn of the session, in order
        [response(text("answer to 0"))], [response(text("answer to 1"), until_file=str(gate), started_file=str(started))],
        [response(text("answer to 2"))]]))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "0", workspace=workspace).session_id  # the session exists before the race
    first: list = []
    with Chronicle(db_url) as one, Chronicle(db_url) as two:
        runner = threading.Thread(target=lambda: first.append(one.run_sync(agent, "1", session=sid)))
        runner.start()
        try:
            wait_for(started)
            second = two.run_sync(agent, "2", session=sid)
        finally:
            gate.touch()
            runner.join(60)
    [first_result] = first
    # The second call ran nothing: its prompt waits for the process running the session, and it says so.
    assert (second.status, second.exit_code, second.input_queued, second.answered) == ("queued", 0, True, ())
    assert second.input_id
    # The first call's answer is to "1", not to "2", which it ran after it.
    assert (first_result.status, first_result.text, first_result.input_queued) == ("completed", "answer to 1", False)
    assert [a.text for a in first_result.answered] == ["answer to 1", "answer to 2"]
    assert all(isinstance(a, Answered) for a in first_result.answered)
    assert [a.input_id for a in first_result.answered] == [first_result.input_id, second.input_id]
    assert first_result.turn_id == first_result.answered[0].turn_id


def test_run_after_a_steer_between_turns_says_its_prompt_is_still_queued_behind_a_paused_turn(db_url, workspace, tmp_path):
    agent = Agent(provider=scripted(tmp_path, [
        [response(text("hello"))],
        [response(tool_use("tu_1", "bash", command="echo hi")), response(text("ran it"))],
        [response(text("answer to mine"))]]))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "hi", workspace=workspace).session_id
        steer_id = app.steer(sid, "run echo")["steer_id"]  # no turn running: queued as the next input
        mine = app.run_sync(agent, "mine", session=sid)
        assert (mine.status, mine.exit_code) == ("awaiting_approval", 3)  # how the run ended, as before
        assert mine.input_queued and mine.input_id
        assert [(a.input_id, a.status) for a in mine.answered] == [(steer_id, "awaiting_approval")]
        app.approve(sid)
        resumed = app.resume(sid)
        assert [a.input_id for a in resumed.answered] == [steer_id, mine.input_id]
        assert resumed.answered[-1].text == "answer to mine" and not resumed.input_queued


def test_a_run_alone_answers_its_prompt_as_before(db_url, workspace, tmp_path):
    agent = Agent(tools=[], provider=scripted(tmp_path, [[response(text("only"))]]))
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "just this", workspace=workspace)
        assert (result.status, result.text, result.exit_code, result.input_queued) == ("completed", "only", 0, False)
        assert [(a.input_id, a.turn_id, a.text) for a in result.answered] == [(result.input_id, result.turn_id, "only")]
