"""The runtime loses PostgreSQL mid-turn (a proxy in between is cut), then gets it back.

eventsourcing retries a lost connection ten times, each waiting up to the connect timeout
(CHRONICLE_PG_CONNECT_TIMEOUT, 1 s here): a longer outage makes `run` fail cleanly with a
clear error, leaving the turn in flight, and `resume` finishes it.
A worker rides a short outage out (the connection pool waits for the database) and finishes
the turn on its own.
Either way no event is lost or duplicated and no tool runs twice.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from chronicle.runtime.store import ChronicleStore
from tests import processes
from tests.helpers import cli, response, text, tool_use
from tests.recovery import assert_recovered, wait_for

SCRIPT = [
    response(tool_use("b1", "bash", command="echo A >> side.txt"), delay_s=0.4),
    response(tool_use("w1", "write_file", path="out.txt", content="x"), delay_s=0.4),
    response(text("done"), delay_s=0.1),
]


def env_for(db: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["CHRONICLE_DB"] = db
    env["CHRONICLE_PG_CONNECT_TIMEOUT"] = "1"
    return env


def test_a_run_that_loses_the_database_fails_cleanly_and_resume_finishes_the_turn(proxied, workspace, tmp_path):
    direct, via_proxy, proxy = proxied
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": SCRIPT}}))
    store = ChronicleStore(direct)
    run = processes.start(
        [sys.executable, "-m", "chronicle.runtime.cli", "run", "go", "--provider", f"scripted:{script}",
         "--workspace", str(workspace), "--yes"], env=env_for(via_proxy), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    wait_for(lambda: store.max_position() >= 6, timeout=30)  # the turn has started; the first model call is under way
    proxy.cut()
    _, stderr = run.communicate(timeout=60)
    assert run.returncode == 1, stderr
    assert "lost the event store" in stderr and "chronicle resume" in stderr
    sid = store.session_ids()[0]
    assert store.turn(store.session(sid).active_turn_id).status in ("running", "interrupted")

    proxy.restore()
    resumed = cli("resume", str(sid), "--yes", db=via_proxy)
    assert resumed.returncode == 0, resumed.stderr
    assert_recovered(ChronicleStore(direct), sid)
    assert (workspace / "side.txt").read_text().splitlines() == ["A"]


def test_a_worker_rides_out_a_database_outage_and_finishes_the_turn(proxied, workspace, tmp_path):
    direct, via_proxy, proxy = proxied
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": SCRIPT}}))
    submitted = cli("submit", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=direct)
    assert submitted.returncode == 0, submitted.stderr
    store = ChronicleStore(direct)
    sid = store.resolve_session_id(submitted.stdout.strip())
    worker = processes.start(
        [sys.executable, "-m", "chronicle.runtime.cli", "worker", "--yes", "--poll", "0.1", "--lease-s", "3", "--idle-exit", "1.5"],
        env=env_for(via_proxy), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )
    wait_for(lambda: store.max_position() >= 8, timeout=30)
    proxy.cut(counted=True)
    wait_for(lambda: proxy.turned_away >= 1, timeout=30)  # the worker lost its connection and is trying again
    proxy.restore()
    _, stderr = worker.communicate(timeout=90)
    assert worker.returncode == 0, stderr
    assert_recovered(ChronicleStore(direct), sid)
    assert (workspace / "side.txt").read_text().splitlines() == ["A"]
