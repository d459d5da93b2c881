"""PostgreSQL: opening a store asks the server only what the open needs.

eventsourcing's aggregate recorder looks up its composite row type (`stored_event_uuid`) in the
catalog when it is built, on a pooled connection, so that its insert can send rows of that type.
Of Chronicle's two recorders only the snapshots' insert sends them (the events are saved by our
own function, runtime/chain_postgres.py), and most opens write no snapshot: a CLI read, a fork,
a turn under a hundred events. The lookup cost every open a round trip into a cold catalog
(≈ 1.7 ms on a new server process here) and, asked while the pool was still making its first
connection, a second connection. It is made now by the first snapshot a process writes, on the
connection that writes it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventsourcing.persistence import StoredEvent
from eventsourcing.postgres import PostgresAggregateRecorder
from psycopg.types.composite import CompositeInfo, register_composite


def defer_composite_types(datastore: Any) -> None:
    """Recorders built on `datastore` leave their composite types unregistered (`SnapshotRecorder`
    registers its own when it first inserts). Only while eventsourcing's stored functions are off:
    with them on, every insert sends the composite type."""
    if datastore.enable_db_functions:
        return
    datastore.register_type_adapters = _not_yet


def _not_yet() -> None:
    """Stands in for `PostgresDatastore.register_type_adapters` at a recorder's construction."""


class SnapshotRecorder(PostgresAggregateRecorder):
    """eventsourcing's aggregate recorder (the snapshots table), which registers its row type the
    first time it inserts rather than when it is built."""

    def _insert_stored_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        datastore, name = self.datastore, self.stored_event_type_name
        conn = curs.connection
        info = datastore.psycopg_type_adapters.get(name)
        if info is None:
            info = CompositeInfo.fetch(conn, f"{datastore.schema}.{name}")
            if info is not None:
                register_composite(info, conn)
                datastore.psycopg_type_adapters[name] = info  # `get_connection` registers it on every other connection
                datastore.psycopg_python_types[name] = info.python_type
        elif not conn.adapters.types.get(info.oid):
            register_composite(info, conn)
        super()._insert_stored_events(curs, stored_events, **kwargs)
