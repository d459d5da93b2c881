"""Limits hold whichever command runs the turn: `resume` and `worker` get the guards (and title) `run` has."""

from __future__ import annotations

import json
import signal
import time

from chronicle.runtime.store import ChronicleStore
from tests.e2e.controls_helpers import Background, log_of
from tests.helpers import cli, json_lines, response, text, tool_use
from tests.recovery import wait_for


def script(path, main, titles=()):
    path.write_text(json.dumps({"agents": {"main": main}, "title": list(titles)}), encoding="utf-8")
    return f"scripted:{path}"


def first_step_answered(store: ChronicleStore):
    """The id of a session whose running turn has its first step's tool results stored, if any."""
    for sid in store.session_ids():
        session = store.session(sid)
        if session.active_turn_id is None:
            continue
        turn = store.turn(session.active_turn_id)
        if turn.steps and turn.steps[0]["results"] is not None:
            return sid
    return None


def test_resume_of_an_interrupted_session_with_a_tiny_budget_stops_with_exit_4(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [
        response(tool_use("tu_1", "read_file", path="hello.txt"), usage=(10_000, 1_000)),
        response(text("slow and never reached"), delay_s=30),
    ])
    runner = Background("run", "spend", "--provider", provider, "--model", "claude-sonnet-4-5",
                        "--workspace", str(workspace), "--json", db=db_url)
    store = ChronicleStore(db_url)
    try:
        sid = wait_for(lambda: first_step_answered(store), timeout=30)
        time.sleep(0.05)
        runner.proc.send_signal(signal.SIGKILL)
    finally:
        runner.proc.wait(timeout=10)

    resumed = cli("resume", str(sid), "--budget-usd", "0.01", "--json", db=db_url)
    assert resumed.returncode == 4, resumed.stderr
    assert "session budget reached" in resumed.stderr
    log = log_of(str(sid), db_url)
    assert [e["data"]["guard"] for e in log if e["aggregate"] == "turn" and e["event"] == "Stopped"] == ["budget"]
    assert len([e for e in log if e["event"] == "ModelResponded"]) == 1, "the guard let a second model call through"


def test_a_worker_with_max_tool_calls_1_stops_the_turn_and_audit_shows_the_guard_stop(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [
        response(tool_use("tu_1", "read_file", path="hello.txt"), tool_use("tu_2", "list_dir", path=".")),
        response(text("never reached")),
    ], titles=["Two tools at once"])
    submitted = cli("submit", "two tools", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert submitted.returncode == 0, submitted.stderr
    sid = json.loads(submitted.stdout)["session_id"]

    worked = cli("worker", "--once", "--poll", "0.05", "--max-tool-calls", "1", db=db_url)
    assert worked.returncode == 0, worked.stderr
    assert "stopped" in worked.stderr

    audit = json_lines(cli("audit", "--session", sid, "--json", db=db_url).stdout)
    stops = [row for row in audit if row["kind"] == "guard_stop"]
    assert len(stops) == 1 and "tool-call limit reached" in json.dumps(stops[0])
    calls = {row["links"]["tool_use_id"]: row["status"] for row in audit if row["kind"] == "tool_call"}
    assert calls == {"tu_1": "completed", "tu_2": "skipped"}
    # the worker's loop comes from the same factory as run's: it made the session's title too
    sessions = json_lines(cli("sessions", "--json", db=db_url).stdout)
    assert [s["title"] for s in sessions if s["session_id"] == sid] == ["Two tools at once"]
