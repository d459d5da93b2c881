"""A worker told twice to stop (SIGTERM, SIGTERM) stops at once, as it always did, but kills the process groups of
the commands its bash calls run and says so: the command was left running with parent 1 to its end, and the worker
exited without a word, where docs/deployment.md says a SIGTERM kills the command's process group."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from tests import processes
from tests.e2e.test_cli_mcp import alive
from tests.helpers import cli, response, text, tool_use
from tests.recovery import wait_for


def test_a_second_sigterm_kills_the_running_commands_and_says_what_it_leaves(sqlite_url, workspace, tmp_path):
    pidfile = tmp_path / "sleeper.pid"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [
        response(tool_use("b1", "bash", command=f"sleep 60 & echo $! > {pidfile}; wait")), response(text("done")),
    ]}}), encoding="utf-8")
    submitted = cli("submit", "sleep", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert submitted.returncode == 0, submitted.stderr
    worker = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "worker", "--yes", "--poll", "0.05"],
                             env={**os.environ, "CHRONICLE_DB": sqlite_url}, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", timeout=60)
        sleeper = int(pidfile.read_text())
        worker.send_signal(signal.SIGTERM)
        time.sleep(0.3)
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    finally:
        processes.stop(worker)
    assert worker.returncode == 143, err
    assert "stopped at once by a second signal; 1 running command(s) killed" in err, err
    assert "left to their leases" in err
    wait_for(lambda: not alive(sleeper), timeout=10)  # the command's group went with it, not left to run on


def test_one_sigterm_ends_an_idle_worker_at_once_whatever_its_poll(sqlite_url):
    """An idle worker sleeps `--poll` between looks for work; a SIGTERM said "draining" and then slept the rest of it
    (up to a day), so only a second signal stopped it. The drain now wakes it: exit 0 with nothing in hand."""
    cli("sessions", db=sqlite_url)  # the store exists
    worker = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "worker", "--yes", "--poll", "600"],
                             env={**os.environ, "CHRONICLE_DB": sqlite_url}, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert worker.stderr is not None
        started = worker.stderr.readline()
        assert "started" in started, started
        time.sleep(1.5)  # past its first look for work, into the wait for the next (a signal before it ended at once)
        worker.send_signal(signal.SIGTERM)
        _, err = worker.communicate(timeout=30)
    finally:
        processes.stop(worker)
    assert worker.returncode == 0, err
    assert "draining" in err and "stopped after 0 turn(s)" in err, err
