"""A worker that fails on its own (out of file descriptors) neither stops nor says a user cancelled its turns.

A worker at its descriptor limit (`ulimit -n 20`, 16 turns at once) failed its look for work with EMFILE, raised by
the driver's login (an OSError, not a store error), which stopped the worker; on the way out, `asyncio.run` cancelled
its turns and each was recorded "cancelled by the user" (audit: `cancel by root@vm`), though nobody asked, and their
inputs were never run. Now an OSError is a store that cannot be reached (logged, retried, as a lost database), and a
worker that fails all the same leaves its turns in flight, for their leases, as a second SIGTERM does.
"""

from __future__ import annotations

import asyncio
import errno
import json
from typing import Any
from uuid import UUID

from chronicle.runtime.app.worker import Overrides, Worker, WorkerOptions
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, json_lines, response, text, tool_use, write_script


def submit(db: str, script, workspace, prompt: str) -> UUID:
    done = cli("submit", prompt, "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db)
    assert done.returncode == 0, done.stderr
    return UUID(json.loads(done.stdout)["session_id"])


def tool_running(store: ChronicleStore, sid: UUID) -> bool:
    session = store.session(sid)
    turn = store.turn(session.active_turn_id) if session.active_turn_id else None
    return turn is not None and turn.open_step is not None


def test_out_of_descriptors_while_looking_for_work_is_retried_and_the_turn_completes(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(tool_use("tu1", "bash", command="sleep 1.5")), response(text("done"))])
    sid = submit(db_url, script, workspace, "a")
    store = ChronicleStore(db_url)
    lines: list[str] = []
    worker = Worker(store, Overrides(options=_auto()), WorkerOptions(poll_s=0.1, idle_exit_s=0.5), log=lines.append, name="w1")
    looks = worker.index.sessions
    failing = {"left": 0}

    def look() -> Any:
        if tool_running(store, sid) and failing["left"] == 0 and not any("Too many" in line for line in lines):
            failing["left"] = 3
        if failing["left"]:
            failing["left"] -= 1
            raise OSError(errno.EMFILE, "Too many open files")  # what psycopg's selector raised at the limit
        return looks()

    worker.index.sessions = look  # type: ignore[method-assign]
    try:
        assert asyncio.run(worker.run()) == 0
        idle = store.session(sid).active_turn_id is None
    finally:
        store.close()
    told = [line for line in lines if "store unavailable" in line]
    assert told == ["worker w1: store unavailable: [Errno 24] Too many open files; will retry"], lines
    assert "worker w1: store available again" in lines
    assert [o.status for o in worker.outcomes] == ["completed"] and idle, worker.outcomes


def test_a_worker_that_fails_leaves_its_turns_in_flight_not_cancelled_by_the_user(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(tool_use("tu1", "bash", command="sleep 30")), response(text("done"))])
    sid = submit(db_url, script, workspace, "a")
    store = ChronicleStore(db_url)
    lines: list[str] = []
    worker = Worker(store, Overrides(options=_auto()), WorkerOptions(poll_s=0.1), log=lines.append, name="w1")

    def crash_once_the_tool_runs() -> bool:
        if tool_running(store, sid):
            raise RuntimeError("something the worker did not expect")
        return False

    worker.stop_when = crash_once_the_tool_runs
    try:
        try:
            asyncio.run(worker.run())
        except RuntimeError as exc:
            assert "did not expect" in str(exc)
        else:
            raise AssertionError("the worker's failure was swallowed")
        session = store.session(sid)
        assert session.active_turn_id is not None, lines  # in flight: its lease (released here) lets another take it up
        outcomes = list(worker.outcomes)
    finally:
        store.close()
    assert outcomes == [], outcomes  # no end recorded, cancelled or other
    assert any("left to their leases" in line and "RuntimeError: something" in line for line in lines), lines
    audit = cli("audit", "--session", str(sid), db=db_url)
    assert "cancelled by the user" not in audit.stdout, audit.stdout
    # Another worker (here `resume`) continues it: the input is run, not lost.
    resumed = cli("resume", str(sid), "--yes", db=db_url, timeout=90)
    assert resumed.returncode == 0, resumed.stderr
    assert "done" in resumed.stdout, resumed.stdout + resumed.stderr
    rows = json_lines(cli("log", str(sid), "--json", db=db_url).stdout)
    ends = [row["event"] for row in rows if row["aggregate"] == "turn" and row["event"] in ("Completed", "Cancelled", "Failed")]
    assert ends == ["Completed"], rows
    # The command the worker killed on its way out is told as that, not as a user's cancel.
    call_ends = [row for row in rows if row["aggregate"] == "tool_call" and row["event"] == "Cancelled"]
    assert len(call_ends) == 1 and "the process running it stopped" in json.dumps(call_ends[0]), call_ends
    assert "cancelled by the user" not in json.dumps(rows)


def _auto() -> Any:
    from chronicle.runtime.loop import LoopOptions

    return LoopOptions(auto_approve=True)
