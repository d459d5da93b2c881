"""A worker SIGKILLed inside a non-idempotent tool, on either backend: another worker takes the session
over once the lease has run out, records the tool call as interrupted (the kill is an event, not a
silent gap), does not run it again, and finishes the turn and the input queued behind it.
tests/integration/test_workers_pg.py kills one of several workers on PostgreSQL at whatever point it
is in; this places the kill inside the tool, on SQLite too. Passed from the start."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from chronicle.domain.ids import lease_id
from chronicle.runtime.store import ChronicleStore
from tests import processes
from tests.helpers import cli, response, text, tool_use
from tests.recovery import assert_recovered, wait_for


def _worker(db: str) -> subprocess.Popen[str]:
    env = {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}, "CHRONICLE_DB": db}
    return processes.start([sys.executable, "-m", "chronicle.runtime.cli", "worker", "--poll", "0.05", "--lease-s", "1",
                             "--idle-exit", "1.5", "--yes"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def test_a_worker_killed_inside_a_tool_is_taken_over_and_the_call_is_recorded_interrupted(db_url, workspace, tmp_path):
    inside, gate = tmp_path / "inside", tmp_path / "never"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [
        [response(tool_use("b1", "bash", command=f"echo $$ > {inside}; while [ ! -e {gate} ]; do sleep 0.02; done; echo A >> side.txt")),
         response(text("first done"))],
        [response(text("second done"))],
    ]}}))
    submitted = cli("submit", "first", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    sid = json.loads(submitted.stdout)["session_id"]
    assert cli("submit", "second", "--session", sid, db=db_url).returncode == 0
    victim = _worker(db_url)
    try:
        wait_for(lambda: inside.exists() and inside.read_text().strip() or victim.poll() is not None, timeout=60)
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        assert victim.returncode == -signal.SIGKILL
        heir = _worker(db_url)
        _, err = heir.communicate(timeout=120)
    finally:
        for process in (victim, *([heir] if "heir" in locals() else [])):
            processes.stop(process)
        if inside.exists() and inside.read_text().strip():
            try:
                os.kill(int(inside.read_text()), signal.SIGKILL)  # the killed worker's tool, orphaned, waits for a gate that never opens
            except ProcessLookupError:
                pass
    assert heir.returncode == 0, err[-2000:]

    store = ChronicleStore(db_url)
    session_id = store.resolve_session_id(sid)
    entries = assert_recovered(store, session_id, turns=2)
    assert [store.turn(t).final_text for t in store.session(session_id).turns] == ["first done", "second done"]
    interrupted = [e for e in entries if e["aggregate"] == "tool_call" and e["event"] == "Interrupted"]
    assert len(interrupted) == 1, "the killed tool call is not on the record as interrupted"
    assert not (workspace / "side.txt").exists(), "the interrupted tool ran again"
    takeovers = [e for _, e in store.events_with_positions([lease_id(session_id)]) if type(e).__name__ == "Acquired" and e.previous]
    assert takeovers, "the dead worker's lease was not taken over"
    assert cli("verify", "--all", db=db_url).returncode == 0
    store.close()
