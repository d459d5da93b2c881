"""PostgreSQL: run a recorder's DDL only when it changed since its tables were set up.

eventsourcing's factory runs a recorder's `create_table` every time it builds one: on PostgreSQL
a CREATE TYPE attempt in a transaction of its own, then every CREATE … IF NOT EXISTS in another,
about ten round trips for each of the store's two recorders (events with the hash chain, and
snapshots), paid by every command that opens a store. Here the DDL runs once and leaves a mark: a
digest of the recorder's statements and the tables they made. While the mark is there and so are
its tables (`store_identity.check_postgres` reads both on the store's first connection), opening
runs no DDL. Any change to the statements — an eventsourcing upgrade, an index of ours — changes
the digest, and the DDL runs again as it always did. SQLite's `create_table` is a few cheap local
statements and is left as eventsourcing runs it.
"""

from __future__ import annotations

import hashlib
from typing import Any

from psycopg import sql

from .pg_datastore import SnapshotRecorder
from .store_identity import MARKS_TABLE


def application_recorder(factory: Any, marks: frozenset[str]) -> Any:
    """`factory.application_recorder()` (our chained recorder, from APPLICATION_RECORDER_TOPIC), its DDL by mark."""
    from eventsourcing.utils import resolve_topic

    topic = factory.env.get(factory.APPLICATION_RECORDER_TOPIC)
    cls = resolve_topic(topic) if topic else type(factory).application_recorder_class
    recorder = cls(datastore=factory.datastore, events_table_name=f"{factory.env.name.lower() or 'stored'}_events")
    set_up(recorder, marks, factory)
    return recorder


def snapshot_recorder(factory: Any, marks: frozenset[str]) -> Any:
    """`factory.aggregate_recorder("snapshots")`, its DDL by mark."""
    recorder = SnapshotRecorder(
        datastore=factory.datastore, events_table_name=f"{factory.env.name.lower() or 'stored'}_snapshots",
    )
    set_up(recorder, marks, factory)
    return recorder


def mark_of(recorder: Any) -> str:
    text = "\n".join(statement.as_string(None) for statement in recorder.sql_create_statements)
    return hashlib.sha256(text.encode()).hexdigest()


def set_up(recorder: Any, marks: frozenset[str], factory: Any) -> None:
    if not factory.env_create_table():
        return
    mark = mark_of(recorder)
    if mark in marks:
        return
    recorder.create_table()
    schema, table = sql.Identifier(recorder.datastore.schema or "public"), sql.Identifier(MARKS_TABLE)
    tables = [recorder.events_table_name, *getattr(recorder, "extra_tables", ())]
    try:
        with recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(sql.SQL(
                "CREATE TABLE IF NOT EXISTS {}.{} (mark text PRIMARY KEY, tables text[] NOT NULL, at timestamptz NOT NULL DEFAULT now())"
            ).format(schema, table))
            cursor.execute(sql.SQL("INSERT INTO {}.{} (mark, tables) VALUES (%s, %s) ON CONFLICT (mark) DO NOTHING").format(schema, table),
                           (mark, tables))
    except Exception:  # noqa: BLE001 - e.g. two processes creating the marks table at once: without a mark the next open runs the DDL again
        pass
