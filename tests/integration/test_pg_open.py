"""Opening a PostgreSQL store costs one connection, asks the catalog nothing the open does not need,
and says at once what no wait cures.

Each `chronicle` command opens its store, so every login and round trip spent opening is paid by
every read. The identity check used to log in on a connection of its own, the pool made a second
one for its first client, and the recorders looked up eventsourcing's composite row type, which
only a snapshot's insert uses (runtime/pg_datastore.py); the read models' first statement on each
connection was a `SET search_path`. A mistyped database or role name was told only after the
pool's whole connect timeout, as "couldn't get a connection".
"""

from __future__ import annotations

from contextlib import closing
from urllib.parse import urlparse, urlunparse
from uuid import UUID, uuid4

import pytest
from eventsourcing.persistence import OperationalError

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.app.session_listing import current_listing
from chronicle.runtime.past_context import history_engine
from chronicle.runtime.read_models import projection_engine
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
from tests.conftest import fresh_pg_url
from tests.helpers import cli


def _store_with_a_session(url: str) -> UUID:
    with closing(ChronicleStore(url)) as store:
        session, _ = start_session(store, AgentSpec(name="main", provider="fake", model="m"), "hello")
        return session.id


def test_an_open_and_a_read_use_one_connection_and_no_type_lookup(pg_database):
    url = fresh_pg_url(pg_database)
    session_id = _store_with_a_session(url)
    with closing(ChronicleStore(url)) as store:
        assert store.session(session_id).id == session_id
        datastore = store.recorder.datastore
        assert datastore.pool.get_stats()["connections_num"] == 1
        assert datastore.psycopg_type_adapters == {}


def test_the_first_snapshot_registers_the_row_type_on_the_connection_that_writes_it(pg_database):
    url = fresh_pg_url(pg_database)
    session_id = _store_with_a_session(url)
    with closing(ChronicleStore(url)) as store:
        store.take_snapshot(session_id)
        datastore = store.recorder.datastore
        assert set(datastore.psycopg_type_adapters) == {"stored_event_uuid"}
        assert datastore.pool.get_stats()["connections_num"] == 1
        assert store.snapshots is not None
        assert [s.originator_version for s in store.snapshots.get(session_id)] == [store.session(session_id).version]
        submit_input(store, session_id, "and then")
        store.take_snapshot(session_id)  # registered already: the second insert just sends the rows
        assert len(list(store.snapshots.get(session_id))) == 2
    with closing(ChronicleStore(url)) as again:  # a new process's store reads the snapshots the first one wrote
        assert again.session(session_id).id == session_id
        assert again.snapshots is not None and list(again.snapshots.get(session_id))


def _elsewhere(pg_database: str, *, dbname: str | None = None, user: str | None = None) -> str:
    parsed = urlparse(pg_database)
    netloc = f"{user}@{parsed.hostname}:{parsed.port or 5432}" if user else parsed.netloc
    return urlunparse(parsed._replace(netloc=netloc, path=f"/{dbname}" if dbname else parsed.path))


def test_a_database_that_does_not_exist_is_named_by_the_server_not_by_a_pool_timeout(pg_database, monkeypatch):
    monkeypatch.setenv("CHRONICLE_PG_CONNECT_TIMEOUT", "60")  # waiting this out would be the old behaviour
    missing = f"no_such_{uuid4().hex[:8]}"
    with pytest.raises(OperationalError) as raised:
        ChronicleStore(_elsewhere(pg_database, dbname=missing))
    assert f'database "{missing}" does not exist' in str(raised.value)


def test_the_cli_says_how_to_create_a_missing_database_or_fix_the_role(pg_database):
    missing = f"no_such_{uuid4().hex[:8]}"
    done = cli("log", "x", db=_elsewhere(pg_database, dbname=missing))
    assert done.returncode == 1
    assert f'database "{missing}" does not exist' in done.stderr
    assert f"createdb -h {urlparse(pg_database).hostname}" in done.stderr and missing in done.stderr.split("createdb")[1]
    role = f"nobody_{uuid4().hex[:6]}"
    done = cli("log", "x", db=_elsewhere(pg_database, user=role))
    assert done.returncode == 1
    assert f'role "{role}" does not exist' in done.stderr and "Check the user name and its password" in done.stderr


def _statements_sent(monkeypatch) -> list[str]:
    import psycopg

    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def recording(self, query, *args, **kwargs):
        sent.append(query if isinstance(query, str) else query.as_string(self.connection) if hasattr(query, "as_string") else str(query))
        return execute(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", recording)
    return sent


def test_connections_log_in_looking_in_the_store_schema(pg_database, monkeypatch):
    url = fresh_pg_url(pg_database)
    session_id = _store_with_a_session(url)
    sent = _statements_sent(monkeypatch)
    with closing(ChronicleStore(url)) as store:
        projection_engine(store).catch_up()
        engine = history_engine(store)
        with engine.db.statement() as tx:  # the read models' SQL names no schema
            assert tx.value("SELECT COUNT(*) FROM proj_history_sessions WHERE session_id = %s", (str(session_id),)) == 1
            assert tx.value("SELECT current_schema()") == url.split("?schema=")[1]
        store.take_snapshot(session_id)  # the row type is looked up by its quoted, qualified name
        assert store.snapshots is not None and list(store.snapshots.get(session_id))
    assert not [q for q in sent if q.startswith("SET search_path") or "set_config('search_path'" in q], sent  # set at login
    # `sessions`' own connection sets it after its login, which a pooler cannot refuse or drop
    # (tests/integration/test_pooler_options.py): one statement on a command that reads no more.
    sent.clear()
    listing = current_listing(url)
    assert listing is not None and [row["session_id"] for row in listing.rows] == [str(session_id)]
    assert [q for q in sent if "search_path" in q] == [f'SET search_path TO "{url.split("?schema=")[1]}"'], sent


def _assert_planned_once(store: ChronicleStore, session_id: UUID, times: int) -> None:
    """A read-model statement run `times` times on one connection is prepared from its second
    run on, and PostgreSQL chose its kept generic plan each time rather than planning anew with
    the parameters."""
    read = "SELECT COUNT(*) FROM proj_history_sessions WHERE session_id = %s"
    with history_engine(store).db.statement() as tx:
        for _ in range(times):
            assert tx.value(read, (str(session_id),)) == 1
        plans = tx.one("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement = %s",
                       (read.replace("%s", "$1"),))
    assert plans is not None, "the read was not prepared: each execution was parsed and planned anew"
    generic, custom = plans
    assert custom == 0 and generic >= times - 1, plans


def test_a_read_model_statement_is_planned_once_per_connection(pg_database):
    """psycopg prepares a statement at its fifth run and PostgreSQL plans a prepared statement's
    first five executions with their parameters by default: a time-travel read spent 0.5 ms
    planning for 0.15 ms of work about ten times, on every pooled connection."""
    url = fresh_pg_url(pg_database)
    session_id = _store_with_a_session(url)
    with closing(ChronicleStore(url)) as store:
        projection_engine(store).catch_up()
        _assert_planned_once(store, session_id, 4)


def test_a_schema_name_that_needs_quoting_is_set_after_the_login(pg_database):
    """It was never set when the login could not set it: a read model's statement found the
    tables of `public` instead, or none."""
    import psycopg

    schema = f"Odd-Schema {uuid4().hex[:6]}"
    with psycopg.connect(pg_database, autocommit=True) as conn:
        conn.execute(psycopg.sql.SQL("CREATE SCHEMA {}").format(psycopg.sql.Identifier(schema)))
    url = f"{pg_database}?schema={schema}"
    session_id = _store_with_a_session(url)
    with closing(ChronicleStore(url)) as store:
        projection_engine(store).catch_up()
        engine = history_engine(store)
        with engine.db.statement() as tx:
            assert tx.value("SELECT current_schema()") == schema
            assert tx.value("SELECT COUNT(*) FROM proj_history_sessions WHERE session_id = %s", (str(session_id),)) == 1
        _assert_planned_once(store, session_id, 3)  # the login sets plans without the schema
        store.take_snapshot(session_id)  # the row type is looked up by its quoted, qualified name
        assert store.snapshots is not None and list(store.snapshots.get(session_id))
    listing = current_listing(url)
    assert listing is not None and [row["session_id"] for row in listing.rows] == [str(session_id)]


def test_a_server_that_does_not_answer_is_waited_for_and_the_wait_is_said(pg_database, monkeypatch):
    """A refused connection may be a restart in progress: it is waited out (the connect timeout),
    and a command that seems to hang first says what it waits for."""
    import socket

    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    parsed = urlparse(pg_database)
    closed = urlunparse(parsed._replace(netloc=f"{parsed.username or 'postgres'}@127.0.0.1:{port}"))
    done = cli("log", "x", db=closed, env={"CHRONICLE_PG_CONNECT_TIMEOUT": "1"})
    assert done.returncode == 1
    warning, error = [line for line in done.stderr.splitlines() if line.strip()][:2]
    assert warning.startswith(f"chronicle: warning: PostgreSQL at 127.0.0.1:{port} is not answering (Connection refused)")
    assert "CHRONICLE_PG_CONNECT_TIMEOUT" in warning
    assert error.startswith("error: cannot open the database") and "Connection refused" in error
    assert "Check --db / CHRONICLE_DB and that the server is running." in error
    monkeypatch.setenv("CHRONICLE_PG_CONNECT_TIMEOUT", "1")
    with pytest.raises(OperationalError) as raised:  # a program using the library gets the server's reason too
        ChronicleStore(closed)
    assert "Connection refused" in str(raised.value) and "couldn't get a connection" not in str(raised.value)


def test_a_long_lived_store_whose_database_is_lost_is_told_so_at_once_not_after_a_pool_timeout(pg_database):
    """`chronicle serve`'s store (`fails_fast_when_refused`): a read that found the pool with no
    free connection after its database went waited the whole pool timeout (5 s) for a new one, though the
    pool's login had failed at once, before a direct login learned why (a flaky server test, under
    load). It waits in slices of `QUICK_S` now, sees the pool's logins fail, and says the server's
    reason."""
    import time

    from chronicle.runtime.pg_datastore import QUICK_S, DatabaseRefused, fails_fast_when_refused
    from tests.conftest import own_database, take_database_away

    with own_database(pg_database, "chronicle_gone") as (name, url):
        session_id = _store_with_a_session(url)
        with closing(ChronicleStore(url)) as store:
            datastore = store.recorder.datastore
            fails_fast_when_refused(datastore)
            assert store.session(session_id).id == session_id
            held = datastore.pool.getconn()  # as a request streaming events holds one: the next read needs a new login
            assert datastore.pool.timeout >= 5
            take_database_away(name)
            started = time.monotonic()
            with pytest.raises(DatabaseRefused) as refused:
                store.session(session_id)
            waited = time.monotonic() - started
            assert f'database "{name}" does not exist' in str(refused.value)
            assert waited < QUICK_S + 2, f"waited {waited:.1f} s to learn the database is gone"
            started = time.monotonic()
            with pytest.raises(DatabaseRefused):  # the verdict is kept: the next read is told at once
                store.session(session_id)
            assert time.monotonic() - started < QUICK_S
            datastore.pool.putconn(held)


def test_a_long_lived_store_whose_pool_is_only_busy_waits_for_a_connection(pg_database):
    """The other side of the check above: every connection in use (the pool at its size) is waited for, as long as
    the pool's timeout allows, and told nothing about the database."""
    import threading
    import time

    from chronicle.runtime.pg_datastore import QUICK_S, fails_fast_when_refused

    url = fresh_pg_url(pg_database)
    session_id = _store_with_a_session(url)
    with closing(ChronicleStore(url)) as store:
        datastore = store.recorder.datastore
        fails_fast_when_refused(datastore)
        fails_fast_when_refused(datastore)  # once is enough: a second call wraps nothing again
        pool = datastore.pool
        held = [pool.getconn() for _ in range(pool.max_size)]
        assert pool.get_stats()["pool_size"] == pool.max_size
        freed = threading.Timer(QUICK_S * 3, lambda: pool.putconn(held.pop()))
        freed.start()
        started = time.monotonic()
        try:
            assert store.session(session_id).id == session_id
        finally:
            freed.join()
            for conn in held:
                pool.putconn(conn)
        assert QUICK_S * 3 <= time.monotonic() - started < pool.timeout
        assert pool.get_stats().get("connections_errors", 0) == 0
