"""PostgreSQL ends a run's connections from the server side (pg_terminate_backend: an operator, a
failover, an idle-session reaper) while the run is inside a model call or a tool: the run carries on
with fresh connections, the turn completes, its non-idempotent tool ran once and the log verifies.
tests/integration/test_connection_loss_pg.py cuts the network instead; this is the server's doing,
with the server still up. Passed from the start: kept as the promise it checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from chronicle.runtime.store import ChronicleStore
from tests import processes
from tests.conftest import fresh_pg_url, terminate_backends
from tests.helpers import cli, response, text, tool_use
from tests.recovery import assert_recovered, wait_for


@pytest.mark.parametrize("where", ["model-call", "tool"])
def test_a_run_whose_connections_the_server_ends_mid_step_completes_the_turn(pg_database, workspace, tmp_path, where):
    db = fresh_pg_url(pg_database)
    started, gate = tmp_path / "started", tmp_path / "go"
    wait_in_tool = f"touch {started}; while [ ! -e {gate} ]; do sleep 0.02; done; echo A >> side.txt"
    steps = [
        response(tool_use("b1", "bash", command=wait_in_tool if where == "tool" else "echo A >> side.txt")),
        {**response(text("done")), **({"started_file": str(started), "until_file": str(gate)} if where == "model-call" else {})},
    ]
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": steps}}))
    env = {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}, "CHRONICLE_DB": db}
    run = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "run", "go", "--provider", f"scripted:{script}",
                            "--workspace", str(workspace), "--yes", "--json"],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: started.exists() or run.poll() is not None, timeout=60)
        assert terminate_backends(db) >= 1, "the run held no connection to end"
        gate.touch()
        _, err = run.communicate(timeout=90)
    finally:
        processes.stop(run)
    assert run.returncode == 0, err[-2000:]
    store = ChronicleStore(db)
    sid = store.session_ids()[0]
    assert_recovered(store, sid)
    assert (workspace / "side.txt").read_text().splitlines() == ["A"]
    assert cli("verify", "--all", db=db).returncode == 0
    store.close()
