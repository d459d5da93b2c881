"""A live `run` holds its session: resume and worker leave it alone; after a crash the next run takes over."""

from __future__ import annotations

import json
import os
import signal
import socket

from tests.e2e.controls_helpers import Background, log_of
from tests.helpers import cli, json_lines, response, text, tool_use

GATE = "while [ ! -f go ]; do sleep 0.05; done"


def script(path, turns):
    path.write_text(json.dumps({"agents": {"main": turns}}), encoding="utf-8")
    return f"scripted:{path}"


def test_resume_and_worker_leave_a_live_run_alone_and_name_its_process(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [[response(tool_use("tu_1", "bash", command=GATE)), response(text("done"))]])
    first = Background("run", "first", "--provider", provider, "--workspace", str(workspace), "--yes", "--json", db=db_url)
    try:
        sid = first.wait_for(lambda e: e["type"] == "tool_start")["session_id"]
        resumed = cli("resume", sid, db=db_url)
        assert resumed.returncode == 1, resumed.stderr
        assert "busy:" in resumed.stderr and f"{socket.gethostname()}:{first.proc.pid}:" in resumed.stderr
        worked = cli("worker", "--once", "--poll", "0.05", db=db_url)
        assert worked.returncode == 0, worked.stderr
        (workspace / "go").touch()
        assert first.finish() == 0, first.stderr
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
    turn_events = [e["event"] for e in log_of(sid, db_url) if e["aggregate"] == "turn"]
    assert "Interrupted" not in turn_events and turn_events[-1] == "Completed"
    ends = [e for e in first.events if e["type"] == "turn_end"]
    assert [(e["status"], e["text"]) for e in ends] == [("completed", "done")]


def test_after_a_crash_run_session_takes_the_dead_holders_turn_over_and_runs_the_new_input(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [
        [response(tool_use("tu_1", "bash", command=GATE)), response(text("first done"))],
        [response(text("second done"))],
    ])
    first = Background("run", "first", "--provider", provider, "--workspace", str(workspace), "--yes", "--json", db=db_url)
    sid = first.wait_for(lambda e: e["type"] == "tool_start")["session_id"]
    os.kill(first.proc.pid, signal.SIGKILL)
    first.proc.wait()
    (workspace / "go").touch()
    # The dead process's lease has not run out, but its holder is a process of this machine that is gone.
    second = cli("run", "second", "--session", sid, "--json", "--yes", db=db_url, timeout=60)
    assert second.returncode == 0, second.stderr
    ends = [e for e in json_lines(second.stdout) if e["type"] == "turn_end"]
    assert [(e["status"], e["text"]) for e in ends] == [("completed", "first done"), ("completed", "second done")]
    turn_events = [e["event"] for e in log_of(sid, db_url) if e["aggregate"] == "turn"]
    assert "Interrupted" in turn_events
