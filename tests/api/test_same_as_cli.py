"""Every Chronicle method returns what its command prints with --json, on both backends."""

from __future__ import annotations

import asyncio
import json
import uuid

import pytest

from chronicle import LIVE_EVENTS, Agent, Chronicle, ChronicleError
from chronicle.runtime.actor import process_actor
from tests.helpers import cli, json_lines, response, text, tool_use


def scripted(tmp_path, turns):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": turns}}), encoding="utf-8")
    return f"scripted:{path}"


def test_stream_yields_the_events_run_json_prints_in_the_same_order(db_url, workspace, tmp_path):
    turn = [response(text("Reading."), tool_use("tu_1", "read_file", path="hello.txt")), response(text("It says hello."))]
    provider = scripted(tmp_path, [turn])
    printed = json_lines(cli("run", "read it", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url).stdout)
    app = Chronicle(db_url)

    async def collect():
        return [e async for e in app.stream(Agent(tools=["read_file"], provider=provider), "read it", workspace=workspace)]

    streamed = asyncio.run(collect())
    assert [e.type for e in streamed] == [line["type"] for line in printed]
    for event in streamed:
        assert json.loads(LIVE_EVENTS.dump_json(event)) == event.model_dump(mode="json")  # the line, field for field
    volatile = {"session_id", "turn_id", "tool_call_id", "duration_ms", "next_attempt_at"}
    ends = [(e.model_dump(mode="json"), line) for e, line in zip(streamed, printed, strict=True) if e.type in ("tool_end", "turn_end", "message_end")]
    for mine, theirs in ends:
        assert {k: v for k, v in mine.items() if k not in volatile} == {k: v for k, v in theirs.items() if k not in volatile}
    app.close()


def test_queries_and_time_travel_match_their_commands(db_url, workspace, tmp_path):
    provider = scripted(tmp_path, [
        [response(tool_use("tu_1", "write_file", path="a.txt", content="one")), response(text("wrote a"))],
        [response(text("second"))],
    ])
    app = Chronicle(db_url)
    agent = Agent(tools=["read_file", "write_file"], provider=provider)
    sid = app.run_sync(agent, "write a", workspace=workspace).session_id
    app.run_sync(agent, "again", session=sid)

    def same(method_result, *command):
        done = cli(*command, "--json", db=db_url)
        assert done.returncode in (0, 1), done.stderr
        assert method_result == json_lines(done.stdout), command

    same(app.history(sid), "history", sid)
    same(app.history(sid, at=1), "history", sid, "--at", "1")
    same(app.log(sid), "log", sid)
    same(app.sessions(), "sessions")
    same(app.cost(sid), "cost", sid)
    same(app.audit(session=sid), "audit", "--session", sid)
    same([app.replay(sid)], "replay", sid)

    undone = app.undo(sid, turns=1)
    assert undone["session_id"] == sid and len(undone["undone"]) == 1 and undone["files"] == []
    assert len(app.history(sid)) == 4
    redone = app.redo(sid)
    assert redone == {"session_id": sid, "redone": undone["undone"], "files": []}  # undo's shape: `files` without --files too
    assert cli("undo", sid, "--turns", "1", db=db_url).returncode == 0
    same([redone], "redo", sid)
    files_undone = app.undo(sid, turns=2, files=True)
    assert files_undone["files"] == [{"path": "a.txt", "action": "deleted"}] and not (workspace / "a.txt").exists()
    by_code = app.redo(sid, files=True)
    assert by_code["files"] == [{"path": "a.txt", "action": "reapplied"}]
    assert (workspace / "a.txt").read_text(encoding="utf-8") == "one"
    assert cli("undo", sid, "--turns", "2", "--files", db=db_url).returncode == 0
    same([by_code], "redo", sid, "--files")
    child = app.fork(sid, at=1)
    assert child != sid and app.sessions()[-1]["forked_from"] == {"session_id": sid, "turn": 1, "actor": process_actor()}
    assert app.steer(sid, "also b")["outcome"] == "queued"  # nothing runs: it becomes the next input
    unknown = uuid.uuid4()
    with pytest.raises(ChronicleError) as ended:
        app.steer(sid, "only for that turn", turn=unknown)  # a turn named: refused, not queued
    assert ended.value.code == 1 and f"session {sid} has no turn {unknown}" in str(ended.value)
    assert app.cancel(child)["status"] == "idle"
    compacted = app.compact(sid, strategy="truncate", keep=1)
    assert compacted["ok"] and compacted["turns_compacted"] == 1

    with pytest.raises(ChronicleError) as missing:
        app.history("00000000-dead")
    assert missing.value.code == 2  # an unknown session id is a bad argument, as in the CLI
    with pytest.raises(ChronicleError) as too_far:
        app.history(sid, at=9)
    assert too_far.value.code == 2
    app.close()


def test_approve_deny_and_resume_from_code(db_url, workspace, tmp_path):
    provider = scripted(tmp_path, [
        [response(tool_use("tu_1", "bash", command="echo one")), response(text("ran one"))],
        [response(tool_use("tu_2", "bash", command="echo two")), response(text("skipped two"))],
    ])
    app = Chronicle(db_url)
    agent = Agent(tools=["bash"], provider=provider)
    paused = app.run_sync(agent, "run one", workspace=workspace)
    assert (paused.status, paused.exit_code) == ("awaiting_approval", 3)
    approved = app.approve(paused.session_id)
    assert [row["status"] for row in approved] == ["approved"] and approved[0]["name"] == "bash"
    assert app.resume(paused.session_id).text == "ran one"
    second = app.run_sync(agent, "run two", session=paused.session_id)
    assert second.status == "awaiting_approval"
    assert app.deny(second.session_id, reason="not today")[0]["status"] == "denied"
    finished = app.resume(second.session_id)
    assert (finished.status, finished.text) == ("completed", "skipped two")
    with pytest.raises(ChronicleError) as nothing_waits:
        app.approve(second.session_id)
    assert nothing_waits.value.code == 1
    app.close()
