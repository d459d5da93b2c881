"""`sessions` says how each session's last turn ended (`last_turn_status`), and a turn whose process is gone is listed
`interrupted`, not `running` for ever: killed (`kill -9`) with its turn in flight, the session's lease is held by no live
process, the rule `resume`, the refusals of a busy session and `answers` use (runtime/leases.py:
held_by_a_live_process). The read models and the aggregates answer alike, on a real SQLite file and a real PostgreSQL
schema; a lease a process elsewhere holds (another machine's) keeps the turn `running` until it expires."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from uuid import UUID

from chronicle.runtime.app.session_listing import current_listing
from chronicle.runtime.leases import acquire, renew
from chronicle.runtime.read_models import caught_up
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, json_lines, response, text, tool_use

from .test_session_listing import aggregate_rows

TOOLS = '''
import time
from chronicle import tool


@tool(read_only=True)
def slowtool(s: int) -> str:
    """Sleep."""
    time.sleep(s)
    return "slept"
'''
SLOW = '''
import sys
sys.path.insert(0, sys.argv[3])
from chronicle import Agent, Chronicle
from slow_tools import slowtool

Chronicle(sys.argv[1]).run_sync(Agent(name="slow", tools=[slowtool], provider="scripted:" + sys.argv[2]), "go",
                                 workspace=sys.argv[3])
'''


def _listed(url: str) -> tuple[list[dict], list[dict]]:  # type: ignore[type-arg]
    """(from the read models, caught up first; from the aggregates)"""
    store = ChronicleStore(url)
    try:
        caught_up(store)
    finally:
        store.close()
    listing = current_listing(url)
    assert listing is not None
    return listing.rows, aggregate_rows(url, False)


def _only(url: str) -> tuple[str, str | None]:
    mine, theirs = _listed(url)
    assert mine == theirs
    (row,) = mine
    return row["status"], row["last_turn_status"]


def test_a_killed_turn_is_listed_interrupted_and_each_ending_is_said(db_url, workspace, tmp_path):
    replies = tmp_path / "s.json"
    replies.write_text(json.dumps({"agents": {"slow": [response(tool_use("t1", "slowtool", s=60)), response(text("done"))]}}),
                       encoding="utf-8")
    (workspace / "slow_tools.py").write_text(TOOLS, encoding="utf-8")  # importable where `resume` runs it
    program = tmp_path / "slow.py"
    program.write_text(SLOW, encoding="utf-8")
    running = subprocess.Popen([sys.executable, str(program), db_url, str(replies), str(workspace)])
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                status = _only(db_url)
            except (AssertionError, ValueError):
                status = None
            if status == ("running", "running"):
                break
            assert time.monotonic() < deadline and running.poll() is None, status
            time.sleep(0.2)
        os.kill(running.pid, signal.SIGKILL)  # its lease is never released
        running.wait(10)
    finally:
        if running.poll() is None:
            running.kill()
            running.wait()
    assert _only(db_url) == ("interrupted", "interrupted")  # its holder, a process of this machine, is gone
    shown = cli("sessions", db=db_url)
    assert shown.returncode == 0 and "interrupted" in shown.stdout and "running" not in shown.stdout, shown.stdout
    assert json_lines(cli("sessions", "--json", db=db_url).stdout) == _listed(db_url)[0]

    store = ChronicleStore(db_url)
    sid = UUID(_listed(db_url)[0][0]["session_id"])
    try:
        assert acquire(store, sid, "elsewhere.example:4242:abcdef", 60)  # another machine's process holds it now
        assert _only(db_url) == ("running", "running")
        assert renew(store, sid, "elsewhere.example:4242:abcdef", -1)  # renewed into the past: it expired unrenewed
        assert _only(db_url) == ("interrupted", "interrupted")
    finally:
        store.close()

    ended = cli("cancel", str(sid), db=db_url)  # the lease expired: cancel then resume ends the turn
    assert ended.returncode == 0, ended.stderr
    resumed = cli("resume", str(sid), db=db_url)
    assert resumed.returncode == 130, resumed.stderr  # as `run` exits on a cancelled turn
    assert _only(db_url) == ("idle", "cancelled")  # the session is at rest, and its last turn's ending is said
    table = cli("sessions", db=db_url)
    assert "idle (last: cancelled)" in table.stdout, table.stdout
