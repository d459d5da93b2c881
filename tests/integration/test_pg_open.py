"""Opening a PostgreSQL store costs one connection and asks the catalog nothing the open does not need.

Each `chronicle` command opens its store, so every login and round trip spent opening is paid by
every read. The identity check used to log in on a connection of its own, the pool made a second
one for its first client, and the recorders looked up eventsourcing's composite row type, which
only a snapshot's insert uses (runtime/pg_datastore.py).
"""

from __future__ import annotations

from contextlib import closing
from uuid import UUID

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
from tests.conftest import fresh_pg_url


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
