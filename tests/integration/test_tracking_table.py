"""The projections' tracking table is set up once, not by every command that opens the store.

eventsourcing's factory re-runs its table set-up (a DDL transaction) on every construction of a
tracking recorder; the engine skips it once the table carries eventsourcing's migration marker,
and still runs it when the table or the marker is missing. On SQLite the set-up was two
transactions of every read command's first read of the past (the marker, then `CREATE TABLE IF
NOT EXISTS` and a commit)."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import psycopg

from chronicle.projections.engine import ProjectionEngine
from chronicle.projections.history import HistoryProjection
from chronicle.projections.sql import Database
from chronicle.runtime.store import ChronicleStore
from tests.conftest import fresh_pg_url
from tests.helpers import pg_statements, sqlite_statements


def test_a_second_engine_issues_no_ddl_and_a_lost_marker_is_set_up_again(pg_database):
    pg_url = fresh_pg_url(pg_database)
    store = ChronicleStore(pg_url)
    first = pg_statements(lambda: ProjectionEngine(store, [HistoryProjection()]))
    assert any(s.lstrip().upper().startswith("CREATE TABLE") for s in first)  # a fresh store: set up
    engine = ProjectionEngine(store, [HistoryProjection()])
    engine.catch_up()
    key = HistoryProjection().key
    before = engine.db.position(key)

    reopened = ChronicleStore(pg_url)  # the store's own tables are not the engine's business
    again = pg_statements(lambda: ProjectionEngine(reopened, [HistoryProjection()]))
    assert not [s for s in again if s.lstrip().upper().startswith(("CREATE", "ALTER", "LOCK"))], again

    schema = pg_url.split("?schema=")[1]
    table = store.factory.tracking_recorder().tracking_table_name  # type: ignore[attr-defined]
    with psycopg.connect(pg_url.split("?")[0], autocommit=True) as conn:
        conn.execute(f'DELETE FROM "{schema}"."{table}" WHERE application_name = %s', ("__migration__",))
    rebuilt = ProjectionEngine(ChronicleStore(pg_url), [HistoryProjection()])
    assert rebuilt.db.position(key) == before  # eventsourcing's own set-up ran again and kept the position
    with psycopg.connect(pg_url.split("?")[0], autocommit=True) as conn:
        marker = conn.execute(f'SELECT notification_id FROM "{schema}"."{table}" WHERE application_name = %s',
                              ("__migration__",)).fetchone()
    assert marker is not None


def test_a_read_statement_is_one_round_trip_and_leaves_its_connection_as_it_found_it(pg_database):
    """`Database.statement()` reads in autocommit: no transaction is opened, so none is committed
    when the connection goes back to the pool (that COMMIT was a second round trip per read).
    Back in the pool, the connection is as it was: eventsourcing's pool makes its connections
    autocommit and its recorders assert it (tests/integration/test_pooled_connections.py); one that
    was not is out of autocommit again, also after a read that failed."""
    store = ChronicleStore(fresh_pg_url(pg_database))
    db = ProjectionEngine(store, [HistoryProjection()]).db

    for found in (True, False):
        with db._connection() as conn:
            conn.autocommit = found
        with db.statement() as tx:
            assert tx.value("SELECT 1") == 1
            # No transaction left open by the read: outside autocommit it would be INTRANS here.
            assert tx.cursor.connection.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        with db._connection() as conn:
            assert conn.autocommit is found
        try:
            with db.statement() as tx:
                tx.value("SELECT no_such_column FROM proj_history_turns")
        except Exception as exc:  # noqa: BLE001 - the failure is the point
            assert "no_such_column" in str(exc)
        with db._connection() as conn:
            assert conn.autocommit is found
            conn.autocommit = True  # as the pool made it
    with db.transaction() as tx:
        tx.execute("CREATE TABLE proj_probe (n INTEGER)")
        tx.execute("INSERT INTO proj_probe VALUES (1)")
    with db.statement() as tx:
        assert tx.value("SELECT COUNT(*) FROM proj_probe") == 1
    store.close()


def _engine_statements(url: str) -> list[str]:
    """The SQL a new engine executes on a store just opened (sqlite3's trace of the store's connections)."""
    with sqlite_statements() as seen, closing(ChronicleStore(url)) as store:
        opened = len(seen)  # the store's own tables are not the engine's business
        ProjectionEngine(store, [HistoryProjection()])
    return seen[opened:]


def test_sqlite_a_second_engine_reads_the_marker_with_the_positions_and_sets_up_nothing(tmp_path: Path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    key = HistoryProjection().key

    reads: list[list[str]] = []
    real_read = Database._positions

    def counted(db: Database, keys, prefix=None):  # noqa: ANN001 - the real read, counted
        reads.append(keys)
        return real_read(db, keys, prefix)

    monkeypatch.setattr(Database, "_positions", counted)
    first = _engine_statements(url)
    monkeypatch.setattr(Database, "_positions", real_read)
    assert any(s.lstrip().upper().startswith("CREATE TABLE IF NOT EXISTS TRACKING") for s in first)
    # A store without the table is told so by its first read (SQLite's "no such table"), not
    # waited out as a connection blip: ten reads 0.2 s apart.
    assert len([keys for keys in reads if "__migration__" in keys]) == 1, reads
    with closing(ChronicleStore(url)) as store:
        ProjectionEngine(store, [HistoryProjection()]).catch_up()

    again = _engine_statements(url)
    assert not [s for s in again if s.lstrip().upper().startswith(("CREATE", "ALTER", "INSERT"))], again
    tracking_reads = [s for s in again if "FROM tracking" in s]
    assert len(tracking_reads) == 1 and "__migration__" in tracking_reads[0] and key in tracking_reads[0], again

    with sqlite3.connect(tmp_path / "c.db") as conn:  # a lost marker: eventsourcing's own set-up runs again
        before = conn.execute("SELECT notification_id FROM tracking WHERE application_name = ?", (key,)).fetchone()
        conn.execute("DELETE FROM tracking WHERE application_name = '__migration__'")
    with closing(ChronicleStore(url)) as store:
        rebuilt = ProjectionEngine(store, [HistoryProjection()])
        assert before is not None and rebuilt.db.position(key) == before[0]
    with sqlite3.connect(tmp_path / "c.db") as conn:
        assert conn.execute("SELECT notification_id FROM tracking WHERE application_name = '__migration__'").fetchone()
