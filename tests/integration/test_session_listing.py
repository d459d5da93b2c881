"""`sessions` from the read models (runtime/app/session_listing.py) gives exactly the rows the
aggregates give (`queries.sessions`), on a real SQLite file and a real PostgreSQL schema, and
defers to the aggregates whenever the read models are behind the log.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from uuid import uuid4

import pytest

from chronicle.domain.repair import Repair
from chronicle.projections.summaries import SummariesProjection
from chronicle.runtime.app import archive as archive_app
from chronicle.runtime.app import queries
from chronicle.runtime.app import timetravel as timetravel_app
from chronicle.runtime.app.session_listing import current_listing, open_store_listing
from chronicle.runtime.jobs import cancel_job, submit_job
from chronicle.runtime.read_models import caught_up
from chronicle.runtime.self_repair import SelfRepair
from chronicle.runtime.store import ChronicleStore
from tests.conftest import fresh_pg_url
from tests.helpers import cli, json_lines

from .projection_run import MixedRun
from .test_old_stores import copy_into_postgres

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def build(url: str, tmp_path: Path, workspace: Path) -> tuple[ChronicleStore, MixedRun]:
    """Sub-agents two deep, failed turns, a turn awaiting approval, undo/redo, a fork, an archived
    sub-agent (its child hidden with it), an archived top-level session, inputs queued with no turn
    run, pending steering, a title with a NUL, a repair in the index, an index entry naming no
    session that a repair withdrew again, a job cancelled before it started (its input never runs) and one
    still queued."""
    store = ChronicleStore(url)
    run = MixedRun(store, tmp_path, workspace)
    asyncio.run(run.run())
    s = run.sessions
    now = run.clock.now
    timetravel_app.fork(store, s["a"], at=1)
    timetravel_app.undo(store, s["a"], 1)  # its branch one turn shorter, left so
    archive_app.archive(store, s["a2"], actor="tester")
    archive_app.archive(store, s["f"], actor="tester")
    archive_app.unarchive(store, s["f"], actor="tester")
    archive_app.archive(store, s["d"], actor="tester")

    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.domain.session import Session

    queued = Session.start(uuid4(), AgentSpec(name="waiting"), now())
    queued.queue_input("q1", "first", now())
    queued.queue_input("q2", "second", now())
    store.create_session(queued)
    store.update_session(queued.id, lambda session: session.set_title("nul\x00title", now()))
    store.update_session(s["e"], lambda session: session.steer("st1", "and then this", now()))
    s["job_cancelled"] = submit_job(store, AgentSpec(name="jobbed"), "never run", clock=run.clock).session_id
    cancel_job(store, s["job_cancelled"], clock=run.clock)
    s["job_queued"] = submit_job(store, AgentSpec(name="jobbed"), "run me", clock=run.clock).session_id

    repair = Repair(id=uuid4(), kind="stuck_turn", target="t", session_id=s["c"], detail="silent", timestamp=now())
    repair.attempt("manual_required", "gave up", now())
    store.save(repair, SelfRepair(store).index.trigger_event(repair_id=repair.id))
    dangling = uuid4()
    store.index_session(dangling)
    store.unlist_session(dangling, "no such session")
    store.index_session(uuid4())  # still dangling: listed by id only
    return store, run


def aggregate_rows(url: str, archived: bool) -> list[dict]:  # type: ignore[type-arg]
    """Today's path, in a store of its own (a fresh aggregate cache), as the fallback runs it."""
    store = ChronicleStore(url)
    try:
        return queries.sessions_from_aggregates(store, archived=archived)
    finally:
        store.close()


def assert_same(url: str) -> None:
    caught_up(ChronicleStore(url))
    for archived in (False, True):
        listing = current_listing(url, archived=archived)
        assert listing is not None, "the read models are current: the listing comes from them"
        assert listing.rows == aggregate_rows(url, archived)
        store = ChronicleStore(url)
        assert listing.all_ids == [str(sid) for sid in store.session_ids()]
        assert open_store_listing(caught_up(store), archived=archived) == listing  # the open store's own connection
        store.close()


def test_the_read_models_list_sessions_exactly_as_the_aggregates_do(db_url, tmp_path, workspace):
    store, run = build(db_url, tmp_path, workspace)
    s = {k: str(v) for k, v in run.sessions.items()}
    assert_same(db_url)

    rows = {r["session_id"]: r for r in current_listing(db_url, archived=True).rows}  # type: ignore[union-attr]
    shown = {r["session_id"] for r in current_listing(db_url).rows}  # type: ignore[union-attr]
    # the cases are really there, so the comparison above compared something
    assert rows[s["a2"]]["archived"] and s["a2"] not in shown and s["a2x"] not in shown and s["d"] not in shown
    assert s["f"] in shown and s["a1"] in shown
    assert rows[s["a2x"]]["parent_session_id"] == s["a2"]
    assert rows[s["c"]]["status"] == "idle" and rows[s["c"]]["repair"] == "manual_required"
    assert rows[s["e"]]["status"] == "awaiting_approval"
    # how each session's last turn ended, beside its status (idle whatever the ending): the same from both paths
    assert (rows[s["c"]]["last_turn_status"], rows[s["d"]]["last_turn_status"]) == ("failed", "failed")
    assert rows[s["e"]]["last_turn_status"] == "awaiting_approval" and rows[s["f"]]["last_turn_status"] == "completed"
    assert rows[s["b"]]["last_turn_status"] == "completed"  # its undone turn's, the last it ran
    assert all(r["last_turn_status"] is None for r in rows.values() if r["title"] == "nul\x00title")  # no turn yet
    assert any((r["forked_from"] or {}).get("session_id") == s["a"] and r["forked_from"]["turn"] == 1 for r in rows.values())
    assert any(r["queued"] == 2 and r["title"] == "nul\x00title" for r in rows.values())
    assert rows[s["b"]]["turns"] == 1 and rows[s["a"]]["turns"] == 1
    # a job cancelled before it started: `jobs` says cancelled and no worker or resume runs its input, so it is not
    # "idle, 1 queued" (the table's `queued (1)`); a job still queued is
    assert (rows[s["job_cancelled"]]["status"], rows[s["job_cancelled"]]["queued"]) == ("cancelled", 0)
    assert (rows[s["job_queued"]]["status"], rows[s["job_queued"]]["queued"]) == ("idle", 1)

    cli_rows = cli("sessions", "--all", "--json", db=db_url)
    assert cli_rows.returncode == 0, cli_rows.stderr
    assert json_lines(cli_rows.stdout) == aggregate_rows(db_url, True)

    # More events: the read models are behind, so the listing defers to the aggregates, whose
    # answer has the new facts; the command catches the read models up, and then they answer.
    store.update_session(run.sessions["b"], lambda session: session.queue_input("late", "one more", run.clock.now()))
    archive_app.archive(store, run.sessions["a1"], actor="tester")
    archive_app.unarchive(store, run.sessions["a2"], actor="tester")
    assert current_listing(db_url) is None
    behind = cli("sessions", "--json", db=db_url)
    assert behind.returncode == 0, behind.stderr
    rows_after = json_lines(behind.stdout)
    assert rows_after == aggregate_rows(db_url, False)
    by_id = {r["session_id"]: r for r in rows_after}
    assert by_id[s["b"]]["queued"] == 1 and s["a1"] not in by_id and s["a2x"] in by_id
    assert_same(db_url)
    store.close()


def test_the_library_and_the_server_list_from_the_read_models_once_they_have_caught_up(sqlite_url, tmp_path, workspace):
    """`Chronicle.sessions()` (and so `GET /sessions` and each page of the viewer) loaded every session's aggregate
    at every call, 0.43 s at 3,000 sessions; it now catches the read models up and lists from them, as the CLI does."""
    from chronicle import Chronicle
    from tests.helpers import sqlite_statements

    store, run = build(sqlite_url, tmp_path, workspace)
    store.update_session(run.sessions["b"], lambda session: session.queue_input("late", "one more", run.clock.now()))
    store.close()
    with Chronicle(sqlite_url) as app, sqlite_statements() as seen:
        rows = app.sessions(all=True)  # the read models were behind: caught up first, then read
    assert rows == aggregate_rows(sqlite_url, True)
    assert {r["session_id"]: r for r in rows}[str(run.sessions["b"])]["queued"] == 1  # the late input is listed
    loads = [s for s in seen if "originator_id in (" in s.lower()]
    assert not loads, f"every session's aggregate was loaded: {loads[:1]}"


def test_an_open_store_lists_on_its_own_connections(db_url, tmp_path, workspace):
    """The server and library programs list sessions per page view: the listing runs on the open store's pooled
    connection, not on a login of its own each time (on PostgreSQL, a new server process per page)."""
    import sqlite3

    import psycopg

    from chronicle import Chronicle

    build(db_url, tmp_path, workspace)[0].close()
    opened: list[object] = []

    def counting(real):  # noqa: ANN001, ANN202
        def connect(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
            opened.append(args or kwargs)
            return real(*args, **kwargs)
        return connect

    with Chronicle(db_url) as app:
        first = app.sessions(all=True)  # the pool's connections are made here
        real = (sqlite3.connect, psycopg.connect, psycopg.Connection.connect)
        sqlite3.connect, psycopg.connect = counting(real[0]), counting(real[1])  # type: ignore[assignment]
        psycopg.Connection.connect = counting(real[2])  # type: ignore[method-assign]
        try:
            again = [app.sessions(all=True) for _ in range(3)]
        finally:
            sqlite3.connect, psycopg.connect, psycopg.Connection.connect = real  # type: ignore[assignment,method-assign]
    assert first == aggregate_rows(db_url, True) and all(rows == first for rows in again)
    assert not opened, f"each listing opened a connection of its own: {opened[:1]}"


def test_the_human_table_is_the_same_from_either_path(sqlite_url, tmp_path, workspace):
    store, run = build(sqlite_url, tmp_path, workspace)
    store.update_session(run.sessions["b"], lambda session: session.queue_input("late", "one more", run.clock.now()))
    assert current_listing(sqlite_url) is None
    from_aggregates = cli("sessions", db=sqlite_url)
    assert current_listing(sqlite_url) is not None
    from_read_models = cli("sessions", db=sqlite_url)
    assert from_aggregates.returncode == 0 and from_read_models.returncode == 0, from_aggregates.stderr
    assert from_read_models.stdout == from_aggregates.stdout and "↳" in from_read_models.stdout
    assert cli("sessions", "--all", db=sqlite_url).stdout.count("archived") == 2


def test_a_store_whose_sessions_are_all_archived_says_so_from_either_path(sqlite_url, tmp_path, workspace):
    store = ChronicleStore(sqlite_url)
    run = MixedRun(store, tmp_path, workspace)
    asyncio.run(run.session("b", "plain", ["hello"]))
    archive_app.archive(store, run.sessions["b"], actor="tester")
    first = cli("sessions", db=sqlite_url)
    assert current_listing(sqlite_url) is not None
    second = cli("sessions", db=sqlite_url)
    assert first.stdout == second.stdout and "all 1 are archived" in second.stdout


@pytest.fixture(params=["v1", "v2"])
def old_version(request) -> str:
    return request.param


@pytest.fixture(params=["sqlite", "postgres"])
def old_store(request, old_version, tmp_path) -> str:
    """tests/fixtures/v*_store.db with its read models as the code before summaries v2 left them."""
    fixture = FIXTURES / f"{old_version}_store.db"
    if request.param == "sqlite":
        shutil.copy(fixture, tmp_path / "old.db")
        url = f"sqlite:///{tmp_path / 'old.db'}"
    else:
        url = fresh_pg_url(request.getfixturevalue("pg_database"))
        copy_into_postgres(fixture, url)
    summaries_as_v1_left_them(url)
    return url


#: proj_summaries as version 1 of the projection created it.
V1_COLUMNS = ("session_id TEXT PRIMARY KEY, first_input TEXT, title TEXT, title_model TEXT, titled_at TEXT, title_error TEXT, "
              "compaction_summary TEXT, compacted_at TEXT, compactions BIGINT")


def summaries_as_v1_left_them(url: str) -> None:
    """Every read model current, but the summaries at version 1: its one table (the first nine
    columns of v2's, the same rows) under the key `projection:summaries:v1`, no v2 key."""
    store = ChronicleStore(url)
    engine = caught_up(store)
    with engine.db.transaction() as tx:
        rows = tx.rows(f"SELECT {', '.join(c.split()[0] for c in V1_COLUMNS.split(', '))} FROM proj_summaries")
        for table in SummariesProjection.tables:
            tx.execute(f"DROP TABLE {table}")
        tx.execute(f"CREATE TABLE proj_summaries ({V1_COLUMNS})")
        for row in rows:
            tx.execute(f"INSERT INTO proj_summaries VALUES ({', '.join(['%s'] * len(row))})", row)
        tx.execute(f"DELETE FROM {engine.db.tracking_table} WHERE application_name = %s", (SummariesProjection().key,))
        engine.db.advance(tx, "projection:summaries:v1", engine.head())
    store.close()


def test_an_old_store_rebuilds_the_summaries_and_lists_what_the_old_code_listed(old_store, old_version):
    # v*_sessions.jsonl: `sessions --all --json` of the code before summaries v2 (66fa0fe) on v*_store.db
    before = json_lines((FIXTURES / f"{old_version}_sessions.jsonl").read_text(encoding="utf-8"))
    assert current_listing(old_store, archived=True) is None  # no v2 summaries yet
    first = cli("sessions", "--all", "--json", db=old_store)  # v2 of the summaries is built here
    assert first.returncode == 0, first.stderr
    assert current_listing(old_store, archived=True) is not None
    second = cli("sessions", "--all", "--json", db=old_store)
    assert second.returncode == 0, second.stderr
    assert json_lines(second.stdout) == json_lines(first.stdout)
    # The same rows as the old code listed, extended by the model each session runs on (summaries v3), the instance
    # name (v4), which sessions recorded before it do not have, and how the last turn ended (v6); by creation time, where
    # the old code listed them in index order (the v2 fixture's fork was made after sessions its frozen clock dates later).
    from chronicle.projections.session_listing import oldest_first

    assert all(row.get("model") for row in json_lines(first.stdout))
    assert all(row["instance"] is None for row in json_lines(first.stdout))
    assert all(row["last_turn_status"] in ("completed", "failed", "awaiting_approval", "cancelled", None)
               for row in json_lines(first.stdout))
    assert any(row["last_turn_status"] == "completed" for row in json_lines(first.stdout))
    listed = [{k: v for k, v in row.items() if k not in ("model", "instance", "last_turn_status")}
              for row in json_lines(first.stdout)]
    assert listed == oldest_first(before, lambda row: row["created_at"])
    assert_same(old_store)


def test_an_undecodable_event_makes_the_listing_defer_to_the_aggregates(sqlite_url, tmp_path, workspace):
    import sqlite3

    store = ChronicleStore(sqlite_url)
    run = MixedRun(store, tmp_path, workspace)
    asyncio.run(run.session("b", "plain", ["hello"]))
    asyncio.run(run.session("c", "plain", ["hello"]))
    path = sqlite_url[len("sqlite:///"):]
    with sqlite3.connect(path) as conn:  # damaged before any projection read it
        conn.execute("UPDATE stored_events SET state = x'ff00ff' WHERE originator_id = ? AND originator_version = 2",
                     (run.sessions["c"].hex,))
    first = cli("sessions", "--json", db=sqlite_url)
    assert "cannot be decoded" in first.stderr
    assert current_listing(sqlite_url) is None  # the summaries noted the event they passed over
    second = cli("sessions", "--json", db=sqlite_url)
    assert json_lines(second.stdout) == json_lines(first.stdout) == aggregate_rows(sqlite_url, False)
    assert [r["session_id"] for r in json_lines(second.stdout)] == [str(run.sessions["b"])]


def test_a_url_that_cannot_work_is_reported_by_the_store_path_as_before():
    url = "postgresql://postgres@127.0.0.1:5432/"  # no database name: a ConfigError where the store opens
    assert current_listing(url) is None
    refused = cli("sessions", db=url)
    assert refused.returncode == 2 and "needs a database name" in refused.stderr and "internal error" not in refused.stderr


def test_a_store_whose_summaries_the_code_before_left_lists_its_cancelled_job_cancelled(db_url, workspace, tmp_path):
    """Summaries v4 had no column for a cancelled job: on a store they were current for, the listing is not taken
    from them (their key is not v5's) but from the aggregates, which say `cancelled`, while v5 is built from the log;
    from then on the read models answer the same."""
    from tests.helpers import response, text, write_script

    script = write_script(tmp_path / "s.json", [response(text("never"))])
    submitted = cli("jobs", "submit", "x", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    job_id = json_lines(submitted.stdout)[0]["job_id"]
    assert cli("jobs", "cancel", job_id, db=db_url).returncode == 0
    store = ChronicleStore(db_url)
    engine = caught_up(store)
    with engine.db.transaction() as tx:  # as summaries v4 left them: no job_cancelled column, under the v4 key
        tx.execute("ALTER TABLE proj_summaries DROP COLUMN job_cancelled")
        tx.execute(f"DELETE FROM {engine.db.tracking_table} WHERE application_name = %s", (SummariesProjection().key,))
        engine.db.advance(tx, "projection:summaries:v4", engine.head())
    store.close()
    assert current_listing(db_url) is None
    first = cli("sessions", "--json", db=db_url)
    assert first.returncode == 0, first.stderr
    assert [(r["session_id"], r["status"], r["queued"]) for r in json_lines(first.stdout)] == [(job_id, "cancelled", 0)]
    assert current_listing(db_url) is not None  # v5 was built by that command
    assert json_lines(cli("sessions", "--json", db=db_url).stdout) == json_lines(first.stdout)
    assert "queued" not in cli("sessions", db=db_url).stdout
    assert_same(db_url)
