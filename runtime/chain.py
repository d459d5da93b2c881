"""The hash chain: every stored event gets a link whose digest covers it and the link before it.

Why one chain over the whole log rather than one per session tree: a chain per tree cannot
notice a whole tree (or the session index entry naming it) being deleted, the recorder would
have to decode each event to learn which tree a Turn or ToolCall belongs to, and an auditor
would need one anchor per session. One chain gives one head digest for the whole store.

Why it costs no new serialisation: eventsourcing's PostgreSQL recorder already takes
`LOCK TABLE … IN EXCLUSIVE MODE` on the events table for every insert (commit order =
notification order) and SQLite has a single writer, so appending the links inside that same
transaction just reads the head and writes one row per event while the lock is held anyway.
The links live in their own table, keyed by a gap-free sequence number `seq` (PostgreSQL's
notification ids have gaps after a rolled-back insert), each naming the `position` (the
notification id) and the (aggregate, version) it vouches for. A deleted link is a gap in
`seq`, a moved event no longer matches the link at its position, and a forged event has no link.
The chain takes its own lock too, so it stays correct if the events-table lock is ever relaxed.

    digest(n) = sha256("chronicle-chain-v1" | digest(n-1) | seq | position |
                       originator id | version | topic | state bytes)

with digest(0) = 32 zero bytes. Snapshots are not chained: they are caches of what the events
say, taken after the events commit.
"""

from __future__ import annotations

import hashlib
import struct
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence
from uuid import UUID

from eventsourcing.persistence import Notification, StoredEvent
from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteCursor, SQLiteDatastore

from chronicle.projections.sql import sqlite_synchronous

from .shred_marks import refuse_forgotten_sqlite, trees_of
from .sqlite_pool import still_the_file
from .store_rows import SQLITE_STATE, as_uuid, blob_states

CHAIN_TABLE = "chronicle_chain"
GENESIS = bytes(32)
#: Every digest starts with these bytes (the chain format's name and version).
CHAIN_DOMAIN = b"chronicle-chain-v1\x00"


def link_digest(prev: bytes, seq: int, position: int, originator_id: UUID | str, version: int, topic: str, state: bytes) -> bytes:
    """The digest of one link; every field is length-fixed or length-prefixed, so no two inputs collide."""
    oid = originator_id if isinstance(originator_id, UUID) else UUID(str(originator_id))
    topic_bytes = topic.encode()
    h = hashlib.sha256(CHAIN_DOMAIN)
    h.update(prev)
    h.update(struct.pack(">qq", seq, position))
    h.update(oid.bytes)
    h.update(struct.pack(">qI", version, len(topic_bytes)))
    h.update(topic_bytes)
    h.update(struct.pack(">Q", len(state)))
    h.update(state)
    return h.digest()


@dataclass(frozen=True)
class Link:
    seq: int
    position: int
    originator_id: UUID
    version: int
    digest: bytes


def new_links(head: tuple[int, bytes] | None, events: Sequence[StoredEvent], positions: Sequence[int]) -> list[Link]:
    seq, prev = head if head is not None else (0, GENESIS)
    links = []
    for event, position in zip(events, positions, strict=True):
        seq += 1
        oid = event.originator_id if isinstance(event.originator_id, UUID) else UUID(str(event.originator_id))
        prev = link_digest(prev, seq, position, oid, event.originator_version, event.topic, event.state)
        links.append(Link(seq, position, oid, event.originator_version, prev))
    return links


#: The longest a relaxed commit leaves SQLite's log unflushed (runtime/config.py, `relaxed_commits`):
#: a relaxed commit after this long since the last flush waits for the disk itself.
RELAXED_FLUSH_S = 1.0


class ChainedSQLiteRecorder(SQLiteApplicationRecorder):
    """Stored events plus their links, in the transaction eventsourcing opens for the insert."""

    #: The clock of RELAXED_FLUSH_S (a test gives it one of its own).
    clock: Callable[[], float] = staticmethod(time.monotonic)

    def __init__(self, datastore: SQLiteDatastore, events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name)
        blob_states(self)
        self._flushed_at = self.clock()

    def select_notifications(
        self, start: int | None, limit: int, stop: int | None = None, topics: Sequence[str] = (), *,
        inclusive_of_start: bool = True,
    ) -> Sequence[Notification]:
        """eventsourcing's, selecting the state as bytes (store_rows.SQLITE_STATE): its `SELECT rowid, *`
        fails the whole page on one state a hand edit left as text that is not UTF-8, so `doctor`,
        the projections and every reader of the log failed on it instead of naming that event."""
        where, params = [], list[Any]()
        if start is not None:
            where.append("rowid>=?" if inclusive_of_start else "rowid>?")
            params.append(start)
        if stop is not None:
            where.append("rowid<=?")
            params.append(stop)
        if topics:
            where.append(f"topic IN ({','.join('?' * len(topics))})")
            params.extend(topics)
        statement = (f"SELECT rowid, originator_id, originator_version, topic, {SQLITE_STATE} FROM {self.events_table_name} "
                     + (f"WHERE {' AND '.join(where)} " if where else "") + "ORDER BY rowid LIMIT ?")
        with self.datastore.transaction(commit=False) as c:
            c.execute(statement, [*params, limit])
            return [
                Notification(id=row["rowid"], originator_id=self.convert_originator_id(row["originator_id"]),
                             originator_version=row["originator_version"], topic=row["topic"], state=row["state"])
                for row in c.fetchall()
            ]

    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """eventsourcing's insert, under `synchronous=NORMAL` when the save is `relaxed`: in WAL mode
        the commit is written to the log file but not flushed to the disk. The next commit under
        `FULL` flushes the log, and with it every commit before it."""
        relaxed = bool(kwargs.get("relaxed")) and self.clock() - self._flushed_at < RELAXED_FLUSH_S
        with self.datastore.get_connection(commit=True) as conn:
            sqlite_synchronous(conn, relaxed)
            with conn.transaction(commit=True) as c:
                positions = self._insert_events(c, stored_events, **kwargs)
                still_the_file(conn, self.datastore.pool.db_name)  # rolled back into a deleted file, not committed
        if not relaxed:
            self._flushed_at = self.clock()
        return positions

    def construct_create_table_statements(self) -> list[str]:
        return [
            *super().construct_create_table_statements(),
            f"CREATE TABLE IF NOT EXISTS {CHAIN_TABLE} (seq INTEGER PRIMARY KEY, position INTEGER NOT NULL, "
            "originator_id TEXT NOT NULL, originator_version INTEGER NOT NULL, digest BLOB NOT NULL)",
            f"CREATE INDEX IF NOT EXISTS {CHAIN_TABLE}_position ON {CHAIN_TABLE} (position)",
            f"CREATE INDEX IF NOT EXISTS {CHAIN_TABLE}_originator ON {CHAIN_TABLE} (originator_id)",
        ]

    def convert_originator_id(self, originator_id: str) -> UUID | str:
        """Each row's id text as a UUID, converted once per id (`store_rows.as_uuid`)."""
        return as_uuid(originator_id) if self.datastore.originator_id_type == "uuid" else originator_id

    def _insert_events(self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        positions = super()._insert_events(c, stored_events, **kwargs)
        if not stored_events:
            return positions
        assert positions is not None
        trees = trees_of(e.state for e in stored_events)
        if trees:  # the write lock is held: a forget from any process is either before this or after the commit
            refuse_forgotten_sqlite(c, sorted(trees))
        # The INSERT above holds SQLite's write lock, so this head is the latest one.
        c.execute(f"SELECT seq, digest FROM {CHAIN_TABLE} ORDER BY seq DESC LIMIT 1")
        row = c.fetchone()
        head = (row[0], bytes(row[1])) if row else None
        c.executemany(
            f"INSERT INTO {CHAIN_TABLE} VALUES (?,?,?,?,?)",
            [(k.seq, k.position, k.originator_id.hex, k.version, k.digest) for k in new_links(head, stored_events, positions)],
        )
        return positions


def chained_recorder_topic(persistence_module: str) -> str:
    """The APPLICATION_RECORDER_TOPIC that makes eventsourcing's factory build a chained recorder.

    Named, not imported: the PostgreSQL recorder (and psycopg, its pool, asyncio) costs a third of
    a second to import, which a command on a SQLite store should not pay."""
    if "postgres" in persistence_module:
        return f"{__package__}.chain_postgres:ChainedPostgresRecorder"
    return f"{ChainedSQLiteRecorder.__module__}:{ChainedSQLiteRecorder.__qualname__}"
