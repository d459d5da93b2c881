"""Another process holds the SQLite store's write lock (a long transaction, a backup) while a run's turn needs to write.
The run waits CHRONICLE_SQLITE_BUSY_TIMEOUT seconds (30 by default, hard-coded before), then says in one line that it
lost the store and how to continue, exit 1; what it committed verifies, and `resume` finishes the turn once the lock
is released. The lock is taken while the scripted model call is held at its gate file: no sleeps."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time

from chronicle.runtime.config import sqlite_path
from chronicle.runtime.store import ChronicleStore
from tests import processes
from tests.helpers import cli, response, text, tool_use
from tests.recovery import assert_recovered, wait_for

#: Well under the 30 s default: a run that waited that long would not be back inside RUN_TIMEOUT_S.
BUSY_S = "1"
RUN_TIMEOUT_S = 20


def test_a_store_locked_longer_than_the_busy_timeout_fails_the_run_in_one_line_and_resume_finishes(sqlite_url, workspace, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [
        response(tool_use("b1", "bash", command="echo A >> side.txt")),
        {**response(text("done")), "started_file": str(tmp_path / "asking"), "until_file": str(tmp_path / "locked")},
    ]}}))
    env = {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}, "CHRONICLE_DB": sqlite_url,
           "CHRONICLE_SQLITE_BUSY_TIMEOUT": BUSY_S}
    run = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "run", "go", "--provider", f"scripted:{script}",
                            "--workspace", str(workspace), "--yes"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    holder = sqlite3.connect(sqlite_path(sqlite_url), isolation_level=None)
    try:
        wait_for(lambda: (tmp_path / "asking").exists() or run.poll() is not None, timeout=60)
        assert run.poll() is None, run.communicate()
        holder.execute("BEGIN EXCLUSIVE")  # the model's answer comes next, and the turn must record it
        (tmp_path / "locked").touch()
        started = time.monotonic()
        try:
            _, err = run.communicate(timeout=RUN_TIMEOUT_S)  # the default 30 s: TimeoutExpired
        except subprocess.TimeoutExpired:
            run.kill()
            raise AssertionError(f"the run waited past {RUN_TIMEOUT_S} s for a lock it was told to wait {BUSY_S} s for") from None
        waited = time.monotonic() - started
    finally:
        holder.close()  # releases the lock: a transaction left open is rolled back
        processes.stop(run)
    assert run.returncode == 1, err[-2000:]
    said = err.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("error: lost the event store") and "chronicle resume" in said[0], said
    assert waited >= float(BUSY_S) * 0.9  # it did wait for the lock, as long as it was told
    assert cli("verify", "--all", db=sqlite_url).returncode == 0

    resumed = cli("resume", "--all", "--yes", db=sqlite_url, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    store = ChronicleStore(sqlite_url)
    sid = store.session_ids()[0]
    assert_recovered(store, sid)
    turn = store.turn(store.session(sid).turns[0])
    assert turn.status == "completed" and turn.final_text == "done"
    assert (workspace / "side.txt").read_text().splitlines() == ["A"]  # the tool before the lock ran once, not again
    assert cli("verify", "--all", db=sqlite_url).returncode == 0
    store.close()


def test_a_busy_timeout_that_cannot_work_is_one_line_and_exit_2(sqlite_url):
    done = cli("sessions", db=sqlite_url, env={"CHRONICLE_SQLITE_BUSY_TIMEOUT": "0.5"})
    assert done.returncode == 2, done.stderr
    assert "CHRONICLE_SQLITE_BUSY_TIMEOUT" in done.stderr and len(done.stderr.strip().splitlines()) == 1, done.stderr
