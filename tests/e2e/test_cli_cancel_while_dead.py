"""A cancel recorded while the process running the turn is dead (SIGKILL inside a model call or a tool, then
`chronicle cancel` or `jobs cancel`) is honoured first by whatever takes the turn up next: `resume` and a worker
end it cancelled, with no further model call and no tool run. They used to resume it, call the model again, run
its next tool and complete it, while `jobs` listed the job `cancelled`: the cancel watcher's first check raced the
resumed loop and lost."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from chronicle.runtime.app import queries
from chronicle.runtime.store import ChronicleStore
from tests import processes
from tests.helpers import cli, response, text, tool_use
from tests.recovery import assert_log_is_whole, wait_for


@pytest.fixture(autouse=True)
def _left_shells_end(tmp_path: Path) -> Any:
    """The tool's shell runs in a process group of its own, which the SIGKILL of the run does not reach (as a user's
    would not): the gate it waits on opens when the test ends, or every run of the suite left two shells polling."""
    yield
    (tmp_path / "never").touch()


def _script(tmp_path: Path, where: str) -> tuple[Path, Path]:
    started, gate = tmp_path / "started", tmp_path / "never"
    first: dict[str, Any]
    if where == "model-call":
        first = {**response(tool_use("w1", "write_file", path="a.txt", content="1")), "started_file": str(started),
                 "until_file": str(gate)}
    else:
        first = response(tool_use("b1", "bash", command=f"touch {started}; while [ ! -e {gate} ]; do sleep 0.02; done; echo A >> a.txt"))
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [
        first, response(tool_use("w2", "write_file", path="b.txt", content="2")), response(text("done")),
    ]}}))
    return script, started


def _env(db: str) -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}, "CHRONICLE_DB": db}


def _killed_when(process: subprocess.Popen[str], started: Path) -> None:
    wait_for(lambda: started.exists() or process.poll() is not None, timeout=60)
    assert process.poll() is None, process.communicate()[1][-2000:]
    os.killpg(process.pid, signal.SIGKILL)  # the run (its tool's shell has a process group of its own)
    process.wait(timeout=10)


def _assert_cancelled_and_nothing_more_ran(db: str, sid: str, workspace: Path, where: str) -> list[dict[str, Any]]:
    store = ChronicleStore(db)
    session_id = store.resolve_session_id(sid)
    session = store.session(session_id)
    assert session.active_turn_id is None
    turn = store.turn(session.turns[-1])
    assert turn.status == "cancelled", turn.status
    assert_log_is_whole(store, session_id)
    entries = queries.log(store, session_id)
    responses = [e for e in entries if e["aggregate"] == "turn" and e["event"] == "ModelResponded"]
    assert len(responses) == (1 if where == "tool" else 0), "the model was called again after the cancel"
    assert not (workspace / "b.txt").exists() and not (workspace / "a.txt").exists(), "a tool ran after the cancel"
    calls = {e["aggregate_id"]: e["event"] for e in entries if e["aggregate"] == "tool_call"}
    assert list(calls.values()) == (["Interrupted"] if where == "tool" else []), calls
    assert not [e for e in entries if e["aggregate"] == "turn" and e["event"] == "Resumed"]
    store.close()
    return entries


@pytest.mark.parametrize("where", ["model-call", "tool"])
def test_resume_honours_a_cancel_recorded_while_the_run_was_dead(db_url, workspace, tmp_path, where):
    script, started = _script(tmp_path, where)
    run = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "run", "go", "--provider", f"scripted:{script}",
                           "--workspace", str(workspace), "--yes"],
                          env=_env(db_url), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _killed_when(run, started)
    finally:
        processes.stop(run)
    sid = json.loads(cli("sessions", "--json", db=db_url).stdout.splitlines()[0])["session_id"]
    if where == "model-call":  # nothing runs the turn now: the refusals say what ends it, not to wait for it
        for command in (("undo", sid), ("fork", sid), ("archive", sid)):
            refused = cli(*command, db=db_url)
            assert refused.returncode != 0 and "no process is running it" in refused.stderr, (command, refused.stderr)
            assert f"resume {sid}` continues the turn" in refused.stderr, refused.stderr
    cancelled = cli("cancel", sid, "--wait", "1", db=db_url)
    assert cancelled.returncode == 0, cancelled.stderr
    assert "no process is running it (the one that did stopped)" in " ".join(cancelled.stdout.split()), cancelled.stdout

    resumed = cli("resume", sid, "--yes", db=db_url)

    assert resumed.returncode == 130, resumed.stdout + resumed.stderr
    _assert_cancelled_and_nothing_more_ran(db_url, sid, workspace, where)


def test_a_worker_taking_over_honours_a_job_cancel_recorded_while_its_worker_was_dead(db_url, workspace, tmp_path):
    script, started = _script(tmp_path, "model-call")
    submitted = cli("jobs", "submit", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    sid = json.loads(submitted.stdout)["job_id"]
    command = [sys.executable, "-m", "chronicle.runtime.cli", "worker", "--yes", "--poll", "0.05", "--lease-s", "1", "--idle-exit", "1.5"]
    victim = processes.start(command, env=_env(db_url), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _killed_when(victim, started)
    finally:
        processes.stop(victim)
    assert cli("jobs", "cancel", sid, db=db_url).returncode == 0

    heir = processes.start(command, env=_env(db_url), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        _, err = heir.communicate(timeout=120)
    finally:
        processes.stop(heir)

    assert heir.returncode == 0, err[-2000:]
    _assert_cancelled_and_nothing_more_ran(db_url, sid, workspace, "model-call")
    listed = [json.loads(line) for line in cli("jobs", "--json", db=db_url).stdout.splitlines()]
    assert [row["status"] for row in listed if row["job_id"] == sid] == ["cancelled"], listed
