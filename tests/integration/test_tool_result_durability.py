"""A non-idempotent tool's result is stored as soon as it finishes, not only with the whole step.

Killed after write_file finished but while a slower tool of the same step still runs, the
process has stored write_file's real output and its file effects: `resume` gives the model that
output (not the interrupted note) and `undo --files` can put the file back.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from chronicle.domain.ids import tool_call_id
from chronicle.runtime.store import ChronicleStore
from tests import processes
from tests.helpers import cli, response, text, tool_use
from tests.recovery import assert_recovered, wait_for

SCRIPT = [
    response(tool_use("w1", "write_file", path="notes.txt", content="rewritten\n"), tool_use("b1", "bash", command="sleep 5")),
    response(text("done")),
]


def write_file_completed_and_bash_running(store: ChronicleStore):
    for sid in store.session_ids():
        session = store.session(sid)
        if session.active_turn_id is None:
            continue
        write = store.find_tool_call(tool_call_id(session.active_turn_id, 0, "w1"))
        bash = store.find_tool_call(tool_call_id(session.active_turn_id, 0, "b1"))
        if write is not None and write.status == "completed" and bash is not None and bash.status == "running":
            return sid
    return None


def test_a_write_file_finished_before_a_crash_keeps_its_output_and_its_undo_after_resume(db_url, workspace, tmp_path):
    (workspace / "notes.txt").write_text("original\n", encoding="utf-8")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": SCRIPT}}))
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["CHRONICLE_DB"] = db_url
    process = processes.start(
        [sys.executable, "-m", "chronicle.runtime.cli", "run", "go", "--provider", f"scripted:{script}",
         "--workspace", str(workspace), "--yes", "--json"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
    )
    store = ChronicleStore(db_url)
    try:
        sid = wait_for(lambda: write_file_completed_and_bash_running(store) or process.poll() is not None, timeout=30, interval=0.005)
        os.killpg(process.pid, signal.SIGKILL)
    finally:
        process.wait(timeout=10)
    assert process.returncode == -signal.SIGKILL, "the run finished before the kill; bash should still be sleeping"
    turn = store.turn(store.session(sid).active_turn_id)
    assert turn.steps[0]["results"] is None, "the kill was meant to land before the step's results were stored"
    kept = turn.steps[0]["kept"]["w1"]  # committed with the write's end: its only record
    assert kept["content"] and not kept.get("is_error")
    assert (workspace / "notes.txt").read_text() == "rewritten\n"

    resumed = cli("resume", str(sid), "--yes", db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    assert_recovered(ChronicleStore(db_url), sid)
    store = ChronicleStore(db_url)
    turn = store.turn(store.session(sid).turns[0])
    results = {block["tool_use_id"]: block for block in turn.steps[0]["results"]}
    write = store.tool_call(tool_call_id(turn.id, 0, "w1"))
    assert write.status == "completed" and write.effects
    assert results["w1"] == kept and write.output is None
    assert store.tool_call(tool_call_id(turn.id, 0, "b1")).status == "interrupted"

    undone = cli("undo", str(sid), "--files", "--workspace", str(workspace), db=db_url)
    assert undone.returncode == 0, undone.stderr
    assert (workspace / "notes.txt").read_text() == "original\n"


def test_log_shows_the_delegate_call_started_before_its_childrens_events_and_completed_after(sqlite_url, workspace, tmp_path):
    from tests.e2e.test_cli_subagents import complete, delegate, run_with_agents

    run = run_with_agents(
        tmp_path, workspace, sqlite_url,
        [response(delegate("tu_d", ("researcher", "read hello.txt"))), response(text("reported"))],
        researcher=[response(complete("r1", "hello world"))],
    )
    assert run.returncode == 0, run.stderr
    parent = json.loads(run.stdout.splitlines()[0])["session_id"]
    log = [json.loads(line) for line in cli("log", parent, "--tree", "--json", db=sqlite_url).stdout.splitlines()]
    delegate_call = next(e["aggregate_id"] for e in log if e["event"] == "Requested" and e["data"].get("name") == "delegate")
    started = next(e["position"] for e in log if e["aggregate_id"] == delegate_call and e["event"] == "Started")
    completed = next(e["position"] for e in log if e["aggregate_id"] == delegate_call and e["event"] == "Completed")
    child_positions = [e["position"] for e in log if e["depth"] == 1]
    assert child_positions and started < min(child_positions) and completed > max(child_positions)
