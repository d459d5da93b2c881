"""A store that serves reads but refuses writes (a full disk; here, another process holding SQLite's write lock) is
one line in the worker's log, not a flap: the look for work, a read, succeeded, and the worker said "store available
again", then failed its next write and said "store unavailable" again, nine lines a second for as long as it lasted.
It says the store is back once a write has succeeded."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from uuid import UUID

from chronicle.runtime.app.worker import Overrides, Worker, WorkerOptions
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, response, text, write_script


def test_a_store_that_reads_but_does_not_write_is_said_once_and_its_return_after_a_write(sqlite_url, workspace, tmp_path,
                                                                                         monkeypatch):
    script = write_script(tmp_path / "s.json", [response(text("done"))])
    done = cli("submit", "a", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    assert done.returncode == 0, done.stderr
    sid = UUID(json.loads(done.stdout)["session_id"])
    monkeypatch.setenv("CHRONICLE_SQLITE_BUSY_TIMEOUT", "1")  # each refused write waits a second, not five
    store = ChronicleStore(sqlite_url)
    lines: list[str] = []
    worker = Worker(store, Overrides(), WorkerOptions(poll_s=0.1, idle_exit_s=0.5), log=lines.append, name="w1")
    holder = sqlite3.connect(sqlite_url.removeprefix("sqlite:///"), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # writes wait and fail; reads go on (WAL)

    async def scenario() -> int:
        asyncio.get_running_loop().call_later(4.0, holder.rollback)
        return await worker.run()

    try:
        assert asyncio.run(scenario()) == 0
        idle = store.session(sid).active_turn_id is None and not store.session(sid).queue
    finally:
        holder.close()
        store.close()
    said = [line for line in lines if "store " in line]
    assert said == [f"worker w1: store unavailable while advancing {sid}: database is locked; will retry",
                    "worker w1: store available again"], lines
    assert [o.status for o in worker.outcomes] == ["completed"] and idle, lines
