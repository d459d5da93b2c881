"""The hash chain's PostgreSQL recorder, in its own module so SQLite stores never import psycopg.

See `chain` for what the links are and why they cost no new serialisation. Here a save is one
stored function (`SAVE_FUNCTION`), which computes the links in the server with the same digest as
`chain.link_digest` (`runtime/verify.py` checks them in Python either way).
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

from eventsourcing.persistence import InterfaceError, InternalError, OperationalError, ProgrammingError, StoredEvent
from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore
from eventsourcing.utils import retry
from psycopg.errors import UndefinedFunction
from psycopg.sql import SQL, Identifier, Literal

from chronicle.projections.sql import autocommitted

from .chain import CHAIN_DOMAIN, CHAIN_TABLE, GENESIS
from .shred_marks import HEADER, KEYS_TABLE, MAGIC, PG_REFUSAL

#: The stored function that saves events with their links (one per schema).
SAVE_FUNCTION = "chronicle_save_chained"

log = logging.getLogger(__name__)


class ChainedPostgresRecorder(PostgresApplicationRecorder):
    """eventsourcing's events table, written with the links in one statement.

    eventsourcing's own stored function (POSTGRES_ENABLE_DB_FUNCTIONS) is not used: it would store
    events unchained. Ours takes the same locks as eventsourcing's pipelined insert (the events
    table in EXCLUSIVE mode, so commit order is notification order; the chain's own, so it stays
    right if that lock is ever relaxed) and honours its `lock_timeout`. Unlike that insert, it sends no
    NOTIFY on the events channel: nothing listens to it (cancel and steering have
    their own channel, runtime/control_probes.py; workers and projections read the log by position), and
    every NOTIFY woke each listening backend of the database, which then read the queue in a
    transaction of its own: xact_commit per LLM step was 4.59 with it, 2.61 without (NOTES.md).
    """

    #: Made by this recorder's DDL besides its events table (runtime/schema_marks.py).
    extra_tables = (CHAIN_TABLE,)

    def __init__(self, datastore: PostgresDatastore, *, events_table_name: str = "stored_events") -> None:
        super().__init__(datastore, events_table_name=events_table_name)
        schema = Identifier(self.datastore.schema or "public")
        chain, events = (schema, Identifier(CHAIN_TABLE)), (schema, Identifier(self.events_table_name))
        self.sql_create_statements.append(SQL(
            "CREATE TABLE IF NOT EXISTS {}.{} (seq bigint PRIMARY KEY, position bigint NOT NULL, "
            "originator_id uuid NOT NULL, originator_version bigint NOT NULL, digest bytea NOT NULL)"
        ).format(*chain))
        self.sql_create_statements.append(
            SQL("CREATE INDEX IF NOT EXISTS {} ON {}.{} (position)").format(Identifier(f"{CHAIN_TABLE}_position"), *chain)
        )
        self.sql_create_statements.append(
            SQL("CREATE INDEX IF NOT EXISTS {} ON {}.{} (originator_id)").format(Identifier(f"{CHAIN_TABLE}_originator"), *chain)
        )
        id_type = SQL(self.datastore.originator_id_type)
        function = schema, Identifier(SAVE_FUNCTION)
        # Each link: sha256(domain | previous digest | seq | position | originator id | version |
        # topic length, topic | state length, state), the integers big-endian (int8send, int4send),
        # exactly as `chain.link_digest` packs them. Events are inserted in the arrays' order, so
        # their notification ids ascend in it.
        self._create_function = SQL(
            "CREATE OR REPLACE FUNCTION {}.{}(ids {}[], versions bigint[], topics text[], states bytea[], relaxed boolean) "
            "RETURNS bigint[] LANGUAGE plpgsql AS $save$ "
            "DECLARE positions bigint[]; head_seq bigint; prev bytea; topic_bytes bytea; i integer; trees text[]; gone record; "
            "BEGIN "
            "  IF relaxed THEN PERFORM set_config('synchronous_commit', 'off', true); END IF; "
            "  PERFORM set_config('lock_timeout', {}, true); "
            "  LOCK TABLE {}.{} IN EXCLUSIVE MODE; "
            "  LOCK TABLE {}.{} IN EXCLUSIVE MODE; "
            # Under the lock `TreeKeys.destroy` takes too: a forget is wholly before this save or after it.
            "  SELECT array_agg(DISTINCT CAST(CAST(encode(substring(s FROM {} FOR 16), 'hex') AS uuid) AS text)) INTO trees "
            "    FROM unnest(states) AS s WHERE substring(s FROM 1 FOR {}) = {} AND octet_length(s) > {}; "
            "  IF trees IS NOT NULL THEN "
            "    SELECT k.tree_id, k.forgotten_at INTO gone FROM {}.{} k WHERE k.tree_id = ANY(trees) AND k.wrapped IS NULL LIMIT 1; "
            "    IF FOUND THEN RAISE EXCEPTION '%', {} || gone.tree_id || ' at ' || coalesce(gone.forgotten_at, ''); END IF; "
            "  END IF; "
            "  WITH inserted AS (INSERT INTO {}.{} (originator_id, originator_version, topic, state) "
            "    SELECT * FROM unnest(ids, versions, topics, states) RETURNING notification_id) "
            "  SELECT array_agg(notification_id ORDER BY notification_id) INTO positions FROM inserted; "
            "  SELECT c.seq, c.digest INTO head_seq, prev FROM {}.{} c ORDER BY c.seq DESC LIMIT 1; "
            "  IF NOT FOUND THEN head_seq := 0; prev := {}; END IF; "
            "  FOR i IN 1 .. cardinality(ids) LOOP "
            "    head_seq := head_seq + 1; "
            "    topic_bytes := convert_to(topics[i], 'UTF8'); "
            "    prev := sha256({} || prev || int8send(head_seq) || int8send(positions[i]) "
            "      || uuid_send(CAST(ids[i] AS uuid)) || int8send(versions[i]) || int4send(octet_length(topic_bytes)) || topic_bytes "
            "      || int8send(CAST(octet_length(states[i]) AS bigint)) || states[i]); "
            "    INSERT INTO {}.{} VALUES (head_seq, positions[i], CAST(ids[i] AS uuid), versions[i], prev); "
            "  END LOOP; "
            "  RETURN positions; "
            "END $save$"
        ).format(
            *function, id_type, Literal(f"{self.datastore.lock_timeout}s"), *events, *chain,
            Literal(len(MAGIC) + 1), Literal(len(MAGIC)), Literal(MAGIC), Literal(HEADER), schema, Identifier(KEYS_TABLE),
            Literal(PG_REFUSAL), *events, *chain, Literal(GENESIS), Literal(CHAIN_DOMAIN), *chain,
        )
        self.sql_create_statements.append(self._create_function)
        self._save = SQL(
            "SELECT {}.{}(%b::{}[], %b::bigint[], %b::text[], %b::bytea[], %b) AS positions"
        ).format(*function, id_type)
        self._render_statements()

    def _render_statements(self) -> None:
        """Every statement a read or a save executes, rendered once into plain SQL text: psycopg
        renders a composed statement (schema and table identifiers) again at each execute,
        ≈ 30 µs of joins and encodings each time, for text that never changes."""

        def rendered(statement: Any) -> Any:
            return SQL(statement.as_string(None))

        self.max_notification_id_statement = rendered(self.max_notification_id_statement)
        self._save = rendered(self._save)

    @retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)
    def insert_events(self, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        """One statement, one round trip: the stored function (`SAVE_FUNCTION`) locks, inserts the
        events and their links, and, sent alone on an autocommit connection, is its own transaction.

        The pipelined save it replaced sent nine statements (BEGIN, the settings, two locks, the
        insert, the chain's head, the links, COMMIT) in two round trips; psycopg's client work per
        statement, not the network, was most of a PostgreSQL step's cost (ops/bench/NOTES.md). A
        failure rolls the whole statement back, so events never commit without their links; a
        version conflict is psycopg's UniqueViolation, which `get_connection` turns into the
        IntegrityError the caller retries on a fresh copy."""
        if not stored_events:
            return None
        params = (
            [e.originator_id for e in stored_events],
            [e.originator_version for e in stored_events],
            [e.topic for e in stored_events],
            [e.state for e in stored_events],
            bool(kwargs.get("relaxed")),
        )
        try:
            return self._call_save(params)
        except ProgrammingError as exc:
            if not isinstance(exc.__cause__, UndefinedFunction):
                raise
        # The function is code, not data: a store restored from a dump of its tables alone, or a
        # schema cleaned by hand, lacks it while its marks say the DDL ran. Made again, the save is
        # the same; a second failure is the caller's to see.
        log.warning("%s: the save function %s was missing; created it again", self.datastore.schema or "public", SAVE_FUNCTION)
        self.create_save_function()
        return self._call_save(params)

    def _call_save(self, params: tuple[Any, ...]) -> list[int] | None:
        with self.datastore.get_connection() as conn, autocommitted(conn):
            row = conn.execute(self._save, params, prepare=True, binary=True).fetchone()
        return list(row["positions"]) if row else None

    def save_function_exists(self) -> bool:
        """Whether this schema holds the save function (`chronicle doctor` asks)."""
        with self.datastore.get_connection() as conn, autocommitted(conn):
            row = conn.execute("SELECT to_regprocedure(%s) IS NOT NULL AS found",
                               (f"{self.datastore.schema or 'public'}.{SAVE_FUNCTION}(uuid[], bigint[], text[], bytea[], boolean)",)).fetchone()
        return bool(row and row["found"])

    def create_save_function(self) -> None:
        """CREATE OR REPLACE: two processes that find it missing at once both succeed, or one is
        told the catalogue row changed under it, after which the other's function is there."""
        try:
            with self.datastore.get_connection() as conn, autocommitted(conn):
                conn.execute(self._create_function)
        except (ProgrammingError, OperationalError, InternalError) as exc:
            log.warning("creating %s failed (%s); trying the save anyway", SAVE_FUNCTION, exc)
