"""PostgreSQL ends every connection of a long turn (pg_terminate_backend) once the turn listens for controls on
a LISTEN connection of its own: the turn carries on and completes, under `run` and under a worker. The listener's
loss raised psycopg's own OperationalError, which is not one of the store's errors, so the loop recorded the turn as
failed ("internal error: OperationalError: consuming input failed") and nothing could resume it. A lost listener
now falls back to version lookups and is opened again; a steer sent after the loss still reaches the turn."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psycopg
import pytest

from chronicle.runtime.store import ChronicleStore
from tests import processes
from tests.conftest import fresh_pg_url, terminate_backends
from tests.helpers import cli, response, text, tool_use
from tests.recovery import assert_recovered, wait_for

#: Well past the turn's first LOOKUPS safe points (runtime/control_probes.py), after which it listens.
STEPS = 30


def _listening(url: str) -> bool:
    dbname = url.split("?")[0].rsplit("/", 1)[1]
    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        return conn.execute("SELECT 1 FROM pg_stat_activity WHERE datname = %s AND query LIKE 'LISTEN chronicle_control%%'",
                            (dbname,)).fetchone() is not None



@pytest.mark.parametrize("how", ["run", "worker"])
def test_a_long_turn_whose_listener_connection_is_terminated_completes(pg_database, workspace, tmp_path, how):
    db = fresh_pg_url(pg_database)
    started, gate = tmp_path / "started", tmp_path / "go"
    steps = [response(tool_use(f"w{i}", "write_file", path=f"f{i % 3}.txt", content=str(i))) for i in range(STEPS)]
    steps.append({**response(tool_use("last", "write_file", path="last.txt", content="x")),
                  "started_file": str(started), "until_file": str(gate)})
    steps.append(response(text("done")))
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": steps}}))
    env = {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}, "CHRONICLE_DB": db}
    common = ["--provider", f"scripted:{script}", "--workspace", str(workspace), "--max-iterations", "100"]
    if how == "run":
        command = ["run", "go", *common, "--yes"]
    else:
        assert cli("submit", "go", *common, db=db).returncode == 0
        command = ["worker", "--yes", "--poll", "0.1", "--idle-exit", "1.5"]
    process = processes.start([sys.executable, "-m", "chronicle.runtime.cli", *command],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: started.exists() or process.poll() is not None, timeout=90)
        assert process.poll() is None, process.communicate()[1][-2000:]
        assert _listening(db), "the turn holds no LISTEN connection: the test would test nothing"
        assert terminate_backends(db) >= 2
        sid = ChronicleStore(db).session_ids()[0]
        assert cli("steer", str(sid), "also check f0.txt", "--wait-batch", db=db).returncode == 0
        gate.touch()
        _, err = process.communicate(timeout=120)
    finally:
        processes.stop(process)
    assert process.returncode == 0, err[-2000:]
    assert "internal error" not in err and "turn failed" not in err, err[-2000:]
    store = ChronicleStore(db)
    entries = assert_recovered(store, sid)
    assert not [e for e in entries if e["aggregate"] == "turn" and e["event"] == "Failed"], "the turn was recorded as failed"
    assert store.turn(store.session(sid).turns[-1]).status == "completed"
    assert (workspace / "last.txt").read_text() == "x"
    delivered = [e for e in entries if e["aggregate"] == "session" and e["event"] == "SteeringDelivered"]
    assert delivered, "the steer sent after the loss never reached the turn"
    store.close()
