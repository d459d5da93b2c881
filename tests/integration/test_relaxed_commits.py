"""Which commits wait for the disk (CHRONICLE_DURABILITY, runtime/config.py `relaxed_commits`).

Inside a running turn, a model's response and a step's close over tools that may run twice are
work a resume does again: they are committed without waiting for the disk (SQLite
`synchronous=NORMAL` in WAL mode; PostgreSQL `synchronous_commit = off` for that transaction).
A killed process keeps them either way. A call that must not run twice, a user's message and a
turn's end still wait, and the log on disk stays a prefix, so they flush what came before them.
"""

from __future__ import annotations

import json
from typing import Any

import psycopg
import pytest

from chronicle import Agent, Chronicle, tool
from chronicle.projections.base import Projection
from chronicle.projections.sql import Tx
from chronicle.runtime import chain
from chronicle.runtime.chain_postgres import SAVE_FUNCTION
from tests.helpers import cli, response, text, tool_use


@tool(read_only=True)
def look(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool()
def send(to: str) -> str:
    """Send a message (must not be sent twice)."""
    return f"sent to {to}"


def _script(path: Any) -> str:
    steps = [
        response(tool_use("l1", "look", key="a")),
        response(tool_use("l2", "look", key="b")),
        response(tool_use("s1", "send", to="ops")),
        response(text("Done.")),
    ]
    path.write_text(json.dumps({"agents": {"mailer": steps}}), encoding="utf-8")
    return f"scripted:{path}"


def _commits(app: Chronicle, backend: str, agent: Agent, workspace: Any) -> list[tuple[set[str], bool, bool]]:
    """Runs the agent; each commit as (its event classes, saved relaxed, whether the database was
    told not to wait for the disk: SQLite's `synchronous` at the commit; on PostgreSQL, the save
    function's `relaxed` argument, which `test_the_save_function_turns_the_flush_off_for_its_own_transaction`
    shows the server acting on)."""
    recorder = app.store.recorder
    real_insert, real_execute = recorder.insert_events, psycopg.Cursor.execute
    real_rows = recorder._insert_events
    commits: list[tuple[set[str], bool, bool]] = []
    sent: list[tuple[str, Any]] = []
    levels: list[int] = []

    def watched_execute(cursor, query, *args, **kwargs):  # noqa: ANN001
        sent.append((query.as_string(None) if hasattr(query, "as_string") else str(query), args[0] if args else None))
        return real_execute(cursor, query, *args, **kwargs)

    def rows(c, stored_events, **kwargs):  # noqa: ANN001 - SQLite: the level in force in this very transaction
        if backend == "sqlite":
            c.execute("PRAGMA synchronous")
            levels.append(c.fetchone()[0])
        return real_rows(c, stored_events, **kwargs)

    def insert(stored_events, **kwargs):  # noqa: ANN001
        sent.clear()
        levels.clear()
        positions = real_insert(stored_events, **kwargs)
        unflushed = levels == [1] if backend == "sqlite" else any(SAVE_FUNCTION in q and params[-1] is True for q, params in sent)
        commits.append(({s.topic.rsplit(":", 1)[1] for s in stored_events}, bool(kwargs.get("relaxed")), unflushed))
        return positions

    recorder.insert_events, recorder._insert_events = insert, rows
    psycopg.Cursor.execute = watched_execute  # type: ignore[method-assign]
    try:
        result = app.run_sync(agent, "look twice, then send", workspace=str(workspace))
    finally:
        psycopg.Cursor.execute = real_execute  # type: ignore[method-assign]
        recorder.insert_events, recorder._insert_events = real_insert, real_rows
    assert result.status == "completed", result
    return commits


@pytest.fixture
def mailer(tmp_path):
    return Agent(name="mailer", instructions="Look things up, then send.", tools=[look, send], provider=_script(tmp_path / "s.json"))


def test_responses_and_rerunnable_steps_skip_the_flush_and_everything_else_waits(db_url, mailer, workspace):
    backend = "sqlite" if db_url.startswith("sqlite") else "postgres"
    app = Chronicle(db_url)
    commits = _commits(app, backend, mailer, workspace)
    for names, relaxed, unflushed in commits:
        assert relaxed == unflushed, (names, relaxed, unflushed)  # the database did what the save asked

    def relaxed_where(name: str) -> list[bool]:
        return [relaxed for names, relaxed, _ in commits if name in names]

    assert relaxed_where("Turn.ModelResponded") == [True, True, True, True]
    closes = relaxed_where("Turn.ToolResultsRecorded")
    assert closes == [True, True, True]  # two read-only steps, and the step that only refers to send's kept result
    assert relaxed_where("ToolCall.Started") == [False]  # before send runs: flushed, and the response with it
    assert relaxed_where("Turn.ToolResultsKept") == [False]  # send's end and its output
    assert relaxed_where("Turn.Created") == [False]  # the user's message
    assert relaxed_where("Turn.Completed") == [False]  # the answer
    app.close()


def test_every_commit_waits_when_durability_says_so(db_url, mailer, workspace, monkeypatch):
    monkeypatch.setenv("CHRONICLE_DURABILITY", "every-commit")
    backend = "sqlite" if db_url.startswith("sqlite") else "postgres"
    app = Chronicle(db_url)
    commits = _commits(app, backend, mailer, workspace)
    assert commits and not any(relaxed or unflushed for _, relaxed, unflushed in commits)
    app.close()


def test_the_save_function_turns_the_flush_off_for_its_own_transaction(pg_database):
    """Asked for a relaxed save, the stored function sets `synchronous_commit` off for the
    transaction it runs in (the statement's own, when the recorder sends it); otherwise it leaves
    the server's setting. Seen from inside a transaction kept open around the call."""
    from uuid import uuid4

    from tests.conftest import fresh_pg_url

    app = Chronicle(fresh_pg_url(pg_database))
    recorder = app.store.recorder
    try:
        for relaxed, expected in ((True, "off"), (False, "on")):
            with recorder.datastore.get_connection() as conn, conn.transaction(force_rollback=True):
                found = conn.execute(recorder._save, ([uuid4()], [1], ["t:T"], [b"{}"], relaxed)).fetchone()
                assert len(found["positions"]) == 1
                assert conn.execute("SHOW synchronous_commit").fetchone()["synchronous_commit"] == expected
    finally:
        app.close()


#: The SQLite recorder's clock in the next test: only a nap moves it.
_NOW = [0.0]


@tool(read_only=True)
def nap() -> str:
    """Take longer than the SQLite recorder's flush interval, by its clock."""
    _NOW[0] += chain.RELAXED_FLUSH_S + 1
    return "rested"


def test_sqlite_flushes_at_least_once_an_interval_even_between_relaxed_commits(sqlite_url, workspace, tmp_path):
    path = tmp_path / "nap.json"
    path.write_text(json.dumps({"agents": {"napper": [response(tool_use("n1", "nap")), response(text("Rested."))]}}), encoding="utf-8")
    napper = Agent(name="napper", instructions="Nap.", tools=[nap], provider=f"scripted:{path}")
    app = Chronicle(sqlite_url)
    app.store.recorder.clock = lambda: _NOW[0]
    commits = [(sorted(names), relaxed, unflushed) for names, relaxed, unflushed in _commits(app, "sqlite", napper, workspace)]
    asked = [(names, unflushed) for names, relaxed, unflushed in commits if relaxed]
    assert asked == [
        (["ToolCall.Requested", "Turn.ModelResponded"], True),  # no time since the turn's creation flushed
        (["ToolCall.Completed", "Turn.ToolResultsRecorded"], False),  # a nap longer than the interval since: flushed all the same
        (["Turn.ModelResponded"], True),  # and relaxed again after that flush
    ]
    app.close()


def test_a_bad_durability_is_one_line_naming_the_setting(tmp_path, monkeypatch):
    monkeypatch.setenv("CHRONICLE_DURABILITY", "sometimes")
    done = cli("sessions", db=f"sqlite:///{tmp_path / 'c.db'}")
    assert done.returncode == 2
    assert "CHRONICLE_DURABILITY" in done.stderr and "every-commit" in done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip() == "error: CHRONICLE_DURABILITY: expected one of 'effects' or 'every-commit', got 'sometimes'"


class _LevelSeen(Projection):
    """Notes, inside each catch-up transaction, whether the database will wait for the disk."""

    name, version, tables = "level_seen", 1, {"proj_level_seen": "x TEXT"}

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[bool] = []

    def unhandled(self, tx: Tx, event: Any, position: int) -> None:
        if tx.db.backend == "sqlite":
            waits = tx.value("PRAGMA synchronous") == 2
        else:
            waits = tx.value("SHOW synchronous_commit") != "off"
        self.seen.append(waits)


@pytest.mark.parametrize("durability, waits", [("effects", False), ("every-commit", True)])
def test_read_models_catch_up_without_waiting_for_the_disk_unless_every_commit_must(db_url, monkeypatch, durability, waits):
    """A read model's rows are derived from the log: a power cut loses them together with the
    position that says they were applied, and the next catch-up applies those events again."""
    from datetime import datetime, timezone
    from uuid import uuid4

    from chronicle.domain.lease import SessionLease
    from chronicle.projections import ProjectionEngine
    from chronicle.runtime.store import ChronicleStore

    monkeypatch.setenv("CHRONICLE_DURABILITY", durability)
    store = ChronicleStore(db_url)
    store.save(SessionLease(id=uuid4(), session_id=uuid4(), timestamp=datetime.now(timezone.utc)))  # a durable save first
    probe = _LevelSeen()
    assert ProjectionEngine(store, [probe]).catch_up() >= 1
    assert probe.seen and set(probe.seen) == {waits}
    store.close()
