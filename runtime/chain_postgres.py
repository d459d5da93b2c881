"""The hash chain's PostgreSQL recorder, in its own module so SQLite stores never import psycopg.

See `chain` for what the links are and why they cost no new serialisation.
"""

from __future__ import annotations

from typing import Any, Sequence

from eventsourcing.persistence import InterfaceError, OperationalError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.utils import retry
from psycopg.pq import TransactionStatus
from psycopg.sql import SQL

from .chain import CHAIN_TABLE, new_links

_BEGIN, _COMMIT, _ROLLBACK = SQL("BEGIN"), SQL("COMMIT"), SQL("ROLLBACK")
#: A `relaxed` save (runtime/config.py, `relaxed_commits`): the commit returns before its WAL is
#: flushed, which the server's WAL writer does within a few hundred milliseconds; any later
#: commit that waits flushes it too.
_RELAXED = SQL("SET LOCAL synchronous_commit TO OFF")


class ChainedPostgresRecorder(PostgresApplicationRecorder):
    """eventsourcing's pipelined insert, plus the links, committed or rolled back together.

    `insert_events` is eventsourcing 9.5.6's own (non-function) path, except that a failure is
    re-raised inside the transaction, so events never commit without their links. The stored
    function path (POSTGRES_ENABLE_DB_FUNCTIONS) is not used: it would store events unchained.
    """

    #: Made by this recorder's DDL besides its events table (runtime/schema_marks.py).
    extra_tables = (CHAIN_TABLE,)

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events") -> None:
        from psycopg.sql import Identifier

        super().__init__(datastore, events_table_name=events_table_name)
        table = Identifier(self.datastore.schema or "public"), Identifier(CHAIN_TABLE)
        self.sql_create_statements.append(SQL(
            "CREATE TABLE IF NOT EXISTS {}.{} (seq bigint PRIMARY KEY, position bigint NOT NULL, "
            "originator_id uuid NOT NULL, originator_version bigint NOT NULL, digest bytea NOT NULL)"
        ).format(*table))
        self.sql_create_statements.append(
            SQL("CREATE INDEX IF NOT EXISTS {} ON {}.{} (position)").format(Identifier(f"{CHAIN_TABLE}_position"), *table)
        )
        self.sql_create_statements.append(
            SQL("CREATE INDEX IF NOT EXISTS {} ON {}.{} (originator_id)").format(Identifier(f"{CHAIN_TABLE}_originator"), *table)
        )
        self._chain_lock = SQL("LOCK TABLE {}.{} IN EXCLUSIVE MODE").format(*table)
        self._chain_head = SQL("SELECT seq, digest FROM {}.{} ORDER BY seq DESC LIMIT 1").format(*table)
        self._chain_insert = SQL("INSERT INTO {}.{} VALUES (%s, %s, %s, %s, %s)").format(*table)
        self._render_statements()

    def _render_statements(self) -> None:
        """Every statement a save executes, rendered once into plain SQL text. psycopg renders a
        composed statement (schema and table identifiers) again at each execute: five statements
        per save, ≈ 30 µs of joins and encodings each time, for text that never changes."""

        def rendered(statement: Any) -> Any:
            return SQL(statement.as_string(None))

        self.insert_events_statement = rendered(self.insert_events_statement)
        self.lock_table_statements = [rendered(s) for s in self.lock_table_statements]
        self.max_notification_id_statement = rendered(self.max_notification_id_statement)
        self._chain_lock, self._chain_head, self._chain_insert = (
            rendered(s) for s in (self._chain_lock, self._chain_head, self._chain_insert))

    def _notify_channel(self, curs: Any) -> None:
        """No NOTIFY on the events channel: nothing listens to it (cancel and steering have their
        own channel, runtime/controls.py; workers and projections read the log by position),
        and every NOTIFY wakes each listening backend of the database (every running turn's
        control listener), which then reads the queue in a transaction of its own: xact_commit
        per LLM step was 4.59 with it, 2.61 without (ops/bench/NOTES.md)."""

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """BEGIN travels with the inserts and COMMIT with the links, in one pipeline: two round trips
        per save. psycopg's `transaction()` sends BEGIN and COMMIT each on its own round trip (and
        inside a pipeline syncs as it enters and leaves): five in all."""
        exc: Exception | None = None
        positions: Sequence[int] | None = None
        with self.datastore.get_connection() as conn:
            try:
                with conn.pipeline() as pipeline, conn.cursor() as curs, conn.cursor() as head_curs:
                    curs.execute(_BEGIN)
                    if kwargs.get("relaxed"):
                        curs.execute(_RELAXED)
                    try:
                        self._insert_events(curs, stored_events, **kwargs)
                        if stored_events:
                            self._insert_stored_events(curs, stored_events, **kwargs)  # locks, inserts
                            head_curs.execute(self._chain_lock)
                            head_curs.execute(self._chain_head)
                            pipeline.sync()  # a version conflict raises IntegrityError here
                            positions = self._fetch_ids_after_insert_events(curs, stored_events, **kwargs)
                            row = head_curs.fetchone()
                            head = (row["seq"], bytes(row["digest"])) if row else None
                            links = new_links(head, stored_events, positions or [])
                            head_curs.executemany(
                                self._chain_insert, [(k.seq, k.position, k.originator_id, k.version, k.digest) for k in links]
                            )
                        curs.execute(_COMMIT)  # sent with the links as the pipeline closes
                    except Exception as e:  # noqa: BLE001 - re-raised below, outside the pipeline
                        exc = e
            except Exception as e:  # noqa: BLE001 - reported as the pipeline closed: the links' insert or COMMIT
                # After a failure the statements queued behind it are aborted and closing the pipeline
                # says so (PipelineAborted); the failure that counts is the first one (a version conflict
                # is an IntegrityError the caller retries on a fresh copy).
                exc = exc or e
            if exc is not None:
                if conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
                    try:  # nothing of this insert is committed, and the connection goes back to the pool idle
                        conn.execute(_ROLLBACK)
                    except Exception:  # noqa: BLE001 - the pool discards a connection it cannot reset
                        pass
                raise exc
        return positions
