"""Rows of the store's events and snapshots tables, read by aggregate id, one SQL statement each.

eventsourcing reads through `transaction(commit=False)`: BEGIN, the SELECT, ROLLBACK, and one
aggregate at a time. Time travel, the batched turn read and the loop's steering probe need many
aggregates in one query, or a single indexed value, and a lone statement already reads one
consistent snapshot (SQLite's pooled connections are in autocommit mode; PostgreSQL's run single
statements outside a transaction), so the BEGIN and ROLLBACK were most of a small read's cost.
Both backends are spelled here once: SQLite's `IN (?, …)` and rowid, PostgreSQL's `= ANY(%s)`
and notification id.
"""

from __future__ import annotations

import threading
from functools import lru_cache
from typing import Any
from uuid import UUID

from .sqlite_pool import connect

#: How every SQLite read selects a stored state. The column is declared BLOB and we write bytes, but
#: SQLite keeps whatever type a value was given: a hand edit such as `SET state = '{"x":1}'` or
#: `SET state = substr(state, …) || x'41' || …` stores TEXT, which the `sqlite3` module hands back
#: as `str` or, if it is not valid UTF-8, fails the whole query on ("Could not decode to UTF-8").
#: Cast, the row reads as the bytes it holds, so the damage is reported as an edit of that one event.
SQLITE_STATE = "CAST(state AS BLOB) AS state"


def blob_states(recorder: Any) -> Any:
    """An eventsourcing SQLite recorder (events or snapshots) whose reads of one aggregate select
    the state as bytes (SQLITE_STATE); its `select_notifications` is ChainedSQLiteRecorder's."""
    recorder.select_events_statement = (
        f"SELECT originator_id, originator_version, topic, {SQLITE_STATE} FROM {recorder.events_table_name} WHERE originator_id=? "
    )
    return recorder


def as_uuid(value: Any) -> UUID:
    """A row's aggregate id as a UUID: PostgreSQL's already is; SQLite's hex text is converted once
    per id among the last few thousand, since an aggregate's events are read together (a replay, a
    batch of the log) and building a UUID from text cost more than decoding a small event's JSON."""
    return value if isinstance(value, UUID) else _from_text(str(value))


@lru_cache(maxsize=4096)
def _from_text(text: str) -> UUID:
    return UUID(text)


def sqlite_rows(store: Any, sql: str, params: list[Any]) -> list[Any]:
    """One SELECT on a pooled SQLite connection (the events and snapshots recorders share the datastore)."""
    with store.recorder.datastore.get_connection(commit=False) as connection:
        cursor = connection.cursor()
        cursor.execute(sql, params)
        return list(cursor.fetchall())


def _pg_rows(recorder: Any, template: str, params: tuple[Any, ...], **tables: str) -> list[tuple[Any, ...]]:
    """One statement on a pooled PostgreSQL connection; `{table}` is the recorder's table, schema-qualified.

    Rows come back as tuples: eventsourcing's connections make a dict of every row (a Python call
    per row, most of a batched turn read's row handling on PostgreSQL), and every caller here wants
    the columns in the order it selected them."""
    from psycopg import sql as pgsql
    from psycopg.rows import tuple_row

    schema = pgsql.Identifier(recorder.datastore.schema or "public")
    named = {key: pgsql.SQL("{}.{}").format(schema, pgsql.Identifier(name))
             for key, name in {"table": recorder.events_table_name, **tables}.items()}
    with recorder.datastore.cursor() as cursor:
        cursor.row_factory = tuple_row
        cursor.execute(pgsql.SQL(template).format(**named), params)
        return cursor.fetchall()


def event_rows(
    store: Any, ids: list[UUID], topic_suffix: str | None = None, version: int | None = None,
    offset: int = 0, limit: int | None = None, positions: tuple[int, int] | None = None,
) -> list[tuple[Any, ...]]:
    """(position, originator id, version, topic, state) of the aggregates' events, in log order."""
    sqlite = store.backend == "sqlite"
    extra, params = "", list[Any]()
    if positions is not None:
        extra += f" AND {'rowid' if sqlite else 'notification_id'} BETWEEN {{mark}} AND {{mark}}"
        params.extend(positions)
    if topic_suffix is not None:
        extra += " AND topic LIKE {mark}"
        params.append("%" + topic_suffix)
    if version is not None:
        extra += " AND originator_version = {mark}"
        params.append(version)
    every = "-1" if sqlite else "ALL"
    # One aggregate's events are in log order by version, which its primary key serves: SQLite
    # (and PostgreSQL) then stop at the row asked for, instead of sorting every event of the
    # aggregate by log position first (≈ 1.5 ms for the first TurnEnded of a 500-turn session).
    by_version = len(ids) == 1
    page = f" LIMIT {every if limit is None else int(limit)} OFFSET {int(offset)}" if limit is not None or offset else ""
    if sqlite:
        marks = ",".join("?" * len(ids))
        sql = (
            f"SELECT rowid, originator_id, originator_version, topic, {SQLITE_STATE} FROM {store.recorder.events_table_name} "
            f"WHERE originator_id IN ({marks}){extra.format(mark='?')} ORDER BY {'originator_version' if by_version else 'rowid'}{page}"
        )
        return [tuple(r) for r in sqlite_rows(store, sql, [i.hex for i in ids] + params)]
    rows = _pg_rows(
        store.recorder,
        "SELECT notification_id, originator_id, originator_version, topic, state FROM {table} WHERE originator_id = ANY(%s)"
        + extra.format(mark="%s") + (" ORDER BY originator_version" if by_version else " ORDER BY notification_id") + page,
        (ids, *params),
    )
    return rows


def newest_snapshot_rows(store: Any, ids: list[UUID]) -> list[tuple[Any, ...]]:
    """(originator id, version, topic, state) of each aggregate's newest snapshot: a Session keeps every
    snapshot it took (`session(id, version=N)` starts from them), and only the newest one is read now."""
    recorder: Any = store.snapshots.recorder
    table = recorder.events_table_name
    if store.backend == "sqlite":
        marks = ",".join("?" * len(ids))
        sql = (f"SELECT originator_id, originator_version, topic, {SQLITE_STATE} FROM {table} AS s "
               f"WHERE originator_id IN ({marks}) AND originator_version = "
               f"(SELECT MAX(originator_version) FROM {table} WHERE originator_id = s.originator_id)")
        return [tuple(r) for r in sqlite_rows(store, sql, [i.hex for i in ids])]
    return _pg_rows(recorder, "SELECT DISTINCT ON (originator_id) originator_id, originator_version, topic, state FROM {table} "
                              "WHERE originator_id = ANY(%s) ORDER BY originator_id, originator_version DESC", (ids,))


def events_after_snapshots(store: Any, ids: list[UUID]) -> list[tuple[Any, ...]]:
    """(position, originator id, version, topic, state) of the aggregates' events after each one's newest
    snapshot (all of them for one with none), in log order: a long session's earlier events stay unread."""
    snapshots = store.snapshots.recorder.events_table_name
    if store.backend == "sqlite":
        marks = ",".join("?" * len(ids))
        sql = (
            f"SELECT rowid, originator_id, originator_version, topic, {SQLITE_STATE} FROM {store.recorder.events_table_name} AS e "
            f"WHERE originator_id IN ({marks}) AND originator_version > "
            f"COALESCE((SELECT MAX(originator_version) FROM {snapshots} WHERE originator_id = e.originator_id), 0) ORDER BY rowid"
        )
        return [tuple(r) for r in sqlite_rows(store, sql, [i.hex for i in ids])]
    return _pg_rows(
        store.recorder,
        "SELECT notification_id, originator_id, originator_version, topic, state FROM {table} AS e WHERE originator_id = ANY(%s) "
        "AND originator_version > COALESCE((SELECT MAX(s.originator_version) FROM {snapshots} AS s "
        "WHERE s.originator_id = e.originator_id), 0) ORDER BY notification_id",
        (ids,), snapshots=snapshots,
    )


def ids_in_range(store: Any, low: UUID, high: UUID, first_topic: str) -> list[UUID]:
    """The aggregates whose id lies in [low, high] and whose first event has this topic, oldest first: one range scan
    of the events table's primary key (SQLite keeps ids as hex text, PostgreSQL as uuid; both sort as the bytes do)."""
    if store.backend == "sqlite":
        rows = sqlite_rows(store, f"SELECT originator_id FROM {store.recorder.events_table_name} WHERE originator_id BETWEEN ? AND ? "
                                  "AND originator_version = 1 AND topic = ? ORDER BY rowid", [low.hex, high.hex, first_topic])
    else:
        rows = _pg_rows(store.recorder, "SELECT originator_id FROM {table} WHERE originator_id BETWEEN %s AND %s "
                                        "AND originator_version = 1 AND topic = %s ORDER BY notification_id", (low, high, first_topic))
    return [as_uuid(row[0]) for row in rows]


def latest_version(store: Any, originator_id: UUID, position: int | None = None) -> int:
    """The newest stored version of one aggregate (0 for none), or its newest at or before a log
    position (the aggregate as it stood then): one indexed lookup, no event decoded."""
    if store.backend == "sqlite":
        bound, params = ("", []) if position is None else (" AND rowid <= ?", [position])
        rows = sqlite_rows(store, f"SELECT MAX(originator_version) FROM {store.recorder.events_table_name} WHERE originator_id = ?{bound}",
                           [originator_id.hex, *params])
        return int(rows[0][0] or 0)
    bound, pg_params = ("", ()) if position is None else (" AND notification_id <= %s", (position,))
    rows = _pg_rows(store.recorder, "SELECT MAX(originator_version) AS v FROM {table} WHERE originator_id = %s" + bound,
                    (originator_id, *pg_params))
    return int(rows[0][0] or 0) if rows else 0


class SQLiteVersionLookup:
    """The newest version of one aggregate, on a SQLite connection kept for this one question.

    A running loop asks it at every safe point, two or three times an LLM step, to learn whether
    steering or cancel arrived (runtime/control_probes.py). Through the pool, the checkout and check-in
    around the 5 µs indexed read were four fifths of each probe. The connection reads in autocommit
    (each SELECT sees the newest commit, WAL readers never wait for the writer) and is shared by the
    loop's thread and the cancel watcher's under a lock. An in-memory database (eventsourcing's
    SQLITE_DBNAME given in the store's `env`) may be one per connection, so such a store asks
    through its pool (`usable`)."""

    def __init__(self, datastore: Any, table: str) -> None:
        self._conn = connect(datastore.pool.db_name, datastore.pool.lock_timeout)
        self._sql = f"SELECT MAX(originator_version) FROM {table} WHERE originator_id = ?"
        self._lock = threading.Lock()

    @staticmethod
    def usable(datastore: Any) -> bool:
        return not datastore.pool.is_sqlite_memory_mode

    def __call__(self, originator_id: UUID) -> int:
        with self._lock:
            row = self._conn.execute(self._sql, (originator_id.hex,)).fetchone()
        return int(row[0] or 0)

    def close(self) -> None:
        with self._lock:
            self._conn.close()
