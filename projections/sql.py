"""One SQL surface over the store's own database, SQLite file or PostgreSQL schema.

Projections live in the same database as the events so that a projection's rows and its
tracking position commit in one transaction. The positions are kept by eventsourcing's own
tracking recorder (single-row tracking: one row per name, only ever moved forward), keyed by
projection name rather than application name — SQLite's `tracking` table is shared by every
tracker in the file, so the key is what keeps them apart.

Projection SQL is written once with `%s` placeholders and portable types (TEXT, BIGINT,
DOUBLE PRECISION); on SQLite the placeholders become `?`, on PostgreSQL each pooled connection
looks in the store's schema (its search_path is set at login, or once after it: `search_path_option`)
and plans a prepared statement once (`GENERIC_PLANS`).
"""

from __future__ import annotations

import json
import re
import time
from contextlib import contextmanager, nullcontext
from datetime import datetime, timezone
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, TypeVar

if TYPE_CHECKING:
    from eventsourcing.persistence import TrackingRecorder

T = TypeVar("T")


@lru_cache(maxsize=4096)
def iso(value: datetime) -> str:
    """A fixed-width UTC timestamp, so that text comparison is time comparison.

    `isoformat` rather than `strftime`: the same text for every year from 1000 (strftime's `%Y`
    does not pad earlier years, isoformat does, which keeps the width fixed), at a fraction of
    the cost — a rebuild formats a timestamp for nearly every event. Kept for the last few thousand
    timestamps: the projections of one batch each format the same events' timestamps in turn."""
    if value.tzinfo is not None:
        value = value.astimezone(timezone.utc).replace(tzinfo=None)
    return value.isoformat(timespec="microseconds") + "Z"


def _encoder(sort_keys: bool) -> Callable[[Any], str]:
    """`json.dumps(value, sort_keys=…, ensure_ascii=False, separators=(",", ":"), default=str)`,
    built once. The standard library's C encoder called directly: `dumps` with options builds an
    encoder per call, and `JSONEncoder.encode` builds the C one per call too (with a dict to
    detect cycles, which event values cannot hold); together ≈ 40% of the JSON cost of a rebuild,
    for the same text (tests/unit/test_stored_json.py). Where the C encoder is missing, the
    Python one."""
    from json import encoder

    make = getattr(encoder, "c_make_encoder", None)
    if make is None:
        return json.JSONEncoder(sort_keys=sort_keys, ensure_ascii=False, separators=(",", ":"), default=str).encode
    one = make(None, str, encoder.encode_basestring, None, ":", ",", sort_keys, False, True)
    return lambda value: "".join(one(value, 0))


_ENCODERS = {order: _encoder(order) for order in (True, False)}


def dumps(value: Any, sort_keys: bool = True) -> str:
    """Deterministic JSON for stored columns: the same input always gives the same text.

    `sort_keys=False` keeps the order the event holds (message content, whose tool inputs are
    shown in the model's order), which is just as deterministic."""
    return _ENCODERS[sort_keys](value)


#: PostgreSQL text cannot hold NUL, which model text and titles can. On PostgreSQL every string
#: parameter with a NUL (or with this escape character) is escaped, and read back unescaped, so
#: a projection stores exactly the text the log holds. Code point U+E000 is private-use.
NUL_ESCAPE = "\ue000"
_NUL_CODES = {"0": "\x00", "e": NUL_ESCAPE}


def escape_nul(value: Any) -> Any:
    if isinstance(value, str) and ("\x00" in value or NUL_ESCAPE in value):
        return value.replace(NUL_ESCAPE, NUL_ESCAPE + "e").replace("\x00", NUL_ESCAPE + "0")
    return value


def unescape_nul(value: Any) -> Any:
    if isinstance(value, str) and NUL_ESCAPE in value:
        parts = value.split(NUL_ESCAPE)
        return parts[0] + "".join(_NUL_CODES.get(part[:1], part[:1]) + part[1:] for part in parts[1:])
    return value


_PLAIN_INSERT = re.compile(r"INSERT INTO (\w+) VALUES \((?:%s, )*%s\)")


def _plain_insert_table(sql: str) -> str | None:
    """The table of an `INSERT INTO t VALUES (%s, ...)` of every column in order, which COPY can do."""
    found = _PLAIN_INSERT.fullmatch(sql)
    return found.group(1) if found else None


class Tx:
    """A cursor inside one transaction, with the placeholder style of its backend."""

    def __init__(self, cursor: Any, db: "Database", reader: Any = None) -> None:
        self.cursor = cursor
        self.db = db
        #: Where reads run (`rows`, `dicts`). In a pipelined transaction it is a cursor of its own:
        #: the answer to a write sent earlier on `cursor` can reach psycopg while a read on that
        #: same cursor waits (the server flushes a full output buffer unasked), and then stands
        #: as the read's result ("the last operation didn't produce records").
        self.reader = reader if reader is not None else cursor
        #: Facts a projection already read or wrote in this transaction (a turn's next message
        #: number, a session's parents). Scoped to the transaction, so a rollback forgets them.
        self.memo: dict[Any, Any] = {}
        self._deferred: dict[str, list[tuple[Any, ...] | None]] = {}

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        self._send(self.cursor, sql, params)

    def _send(self, cursor: Any, sql: str, params: Sequence[Any]) -> None:
        """`sql` on `cursor`, in its backend's placeholder style, PostgreSQL's values NUL-escaped."""
        if self.db.backend == "sqlite":
            cursor.execute(sql.replace("%s", "?"), tuple(params))
        else:
            cursor.execute(sql, tuple(escape_nul(p) for p in params))

    def insert_later(self, sql: str, params: Sequence[Any]) -> tuple[str, int]:
        """An INSERT into a table no handler reads back in this transaction: sent in one
        `executemany` per statement just before the commit (one round trip instead of one per
        row on PostgreSQL, no per-call overhead on SQLite)."""
        rows = self._deferred.setdefault(sql, [])
        rows.append(tuple(params))
        return sql, len(rows) - 1

    def replace_later(self, handle: tuple[str, int], params: Sequence[Any]) -> None:
        """Change a row `insert_later` queued in this transaction (its handle), before it is sent."""
        sql, index = handle
        self._deferred[sql][index] = tuple(params)

    def cancel_later(self, handle: tuple[str, int]) -> None:
        """Strike off a row `insert_later` queued in this transaction: it is not sent."""
        sql, index = handle
        self._deferred[sql][index] = None

    def flush(self, copy: bool = True) -> None:
        """Send the rows `insert_later` queued. `copy=False` inside a pipelined transaction, which
        COPY cannot run in (a handler that must read what it queued, before the commit)."""
        deferred, self._deferred = self._deferred, {}
        for sql, queued in deferred.items():
            rows = [row for row in queued if row is not None]
            if not rows:
                continue
            if self.db.backend == "sqlite":
                self.cursor.executemany(sql.replace("%s", "?"), rows)
            elif copy and (table := _plain_insert_table(sql)) is not None:
                # COPY streams the rows as one statement: an executemany pipeline still sends and
                # executes one INSERT per row, which was most of a PostgreSQL rebuild's time.
                with self.cursor.copy(f"COPY {table} FROM STDIN") as stream:
                    for row in rows:
                        stream.write_row([escape_nul(p) for p in row])
            else:
                self.cursor.executemany(sql, [tuple(escape_nul(p) for p in row) for row in rows])

    def any_of(self, column: str, values: Sequence[Any]) -> tuple[str, list[Any]]:
        """`column` is one of `values`: (SQL, params). PostgreSQL takes the list as one array
        parameter (`= ANY`), which it plans once, instead of hundreds of placeholders."""
        if self.db.backend == "sqlite":
            return f"{column} IN ({', '.join(['%s'] * len(values))})", list(values)
        return f"{column} = ANY(%s)", [list(values)]

    def _read(self, sql: str, params: Sequence[Any]) -> None:
        self._send(self.reader, sql, params)

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        self._read(sql, params)
        if self.db.backend == "sqlite":
            # Plain tuples from sqlite3 itself: converting its Row objects one by one took a third of
            # a long `history --at` read.
            raw = self.reader.sqlite_cursor
            factory, raw.row_factory = raw.row_factory, None
            try:
                return raw.fetchall()  # type: ignore[no-any-return]
            finally:
                raw.row_factory = factory
        # Tuples straight from psycopg (the pool's connections make dicts), and only the rare
        # string that holds the escape character goes through `unescape_nul`: per value, the
        # dict rows and that call were most of a long `history --at` read on PostgreSQL.
        from psycopg.rows import tuple_row

        factory, self.reader.row_factory = self.reader.row_factory, tuple_row
        try:
            fetched = self.reader.fetchall()
        finally:
            self.reader.row_factory = factory
        if not any(NUL_ESCAPE in v for row in fetched for v in row if type(v) is str):
            return fetched  # type: ignore[no-any-return]
        return [tuple(unescape_nul(v) for v in row) for row in fetched]

    def one(self, sql: str, params: Sequence[Any] = ()) -> tuple[Any, ...] | None:
        found = self.rows(sql, params)
        return found[0] if found else None

    def value(self, sql: str, params: Sequence[Any] = ()) -> Any:
        row = self.one(sql, params)
        return row[0] if row else None

    def dicts(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        # `rows`' plain tuples zipped with the column names: a dict built key by key from each
        # sqlite3.Row (or each psycopg dict row, every value through `unescape_nul`) was a third of
        # listing 3,000 sessions, as it was of a long `history --at` read.
        fetched = self.rows(sql, params)
        cursor = self.reader.sqlite_cursor if self.db.backend == "sqlite" else self.reader
        names = [d[0] for d in cursor.description]
        if len(set(names)) < len(names):  # a name twice (a join's `*`): the first column's value, as sqlite3.Row gave
            firsts = {name: names.index(name) for name in names}
            return [{name: row[i] for name, i in firsts.items()} for row in fetched]
        return [dict(zip(names, row, strict=True)) for row in fetched]


def creation_race(exc: BaseException) -> bool:
    """Whether `exc` is PostgreSQL's answer to two sessions creating the same table (or type) at
    once: `CREATE … IF NOT EXISTS` checks the catalogue before it writes to it, so the later of
    two concurrent creations fails ("already exists", "tuple concurrently updated") though the
    table is there once the first commits."""
    text = str(exc)
    return "already exists" in text or "concurrently updated" in text


def lost_creation_race(exc: BaseException) -> bool:
    """Whether `exc` says another process is creating the same store or table at this moment:
    PostgreSQL's catalogue refusal (`creation_race`); eventsourcing's IntegrityError when the other
    process wrote a table's migration marker first; SQLite's "database is locked" while the other
    switches a new file to WAL (no busy wait covers that) or sets up its tables."""
    from eventsourcing.persistence import IntegrityError  # not at import: `sessions` needs none of it

    return creation_race(exc) or isinstance(exc, IntegrityError) or "database is locked" in str(exc)


def retry_creation(make: Callable[[], T], lost: Callable[[BaseException], bool] = lost_creation_race, attempts: int = 5) -> T:
    """`make()`, tried again after a short wait while it fails by losing a creation race (`lost`):
    processes that start at once on a new store all create its tables, and all but one lose; by
    the next try the winner's tables are there."""
    for attempt in range(attempts):
        try:
            return make()
        except Exception as exc:  # noqa: BLE001 - only a lost race is tried again
            if attempt + 1 == attempts or not lost(exc):
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


@contextmanager
def autocommitted(conn: Any) -> Iterator[Any]:
    """A PostgreSQL connection in autocommit for the block, given back as it came.

    eventsourcing's pool makes its connections autocommit and its recorders rely on it (a
    snapshot's insert asserts it); one that is not (a caller's own) is switched for the block, so
    that a lone statement is its own transaction, and switched back after it."""
    autocommit = conn.autocommit
    if not autocommit:
        conn.autocommit = True
    try:
        yield conn
    finally:
        try:
            if not autocommit and not conn.closed:
                conn.autocommit = False
        except Exception:  # noqa: BLE001 - left mid-statement (an interrupt): it goes, not back to the pool as it is
            conn.close()


def like_prefix(prefix: str) -> str:
    """A LIKE pattern for the text that starts with `prefix`; its `%` would match anything, so none may be in it."""
    if "%" in prefix:
        raise ValueError(f"no '%' in a prefix: {prefix!r}")
    return prefix + "%"


_PLAIN_NAME = re.compile(r"[a-z_][a-z0-9_]*")


def search_path_option(schema: str) -> str | None:
    """libpq's `options` that log a connection in already looking in `schema`, so that no `SET
    search_path` round trip follows the login; None for a name that would need quoting there (it
    is then set after the login, as an identifier)."""
    return f"-c search_path={schema}" if _PLAIN_NAME.fullmatch(schema) else None


#: A statement a connection runs again is planned once there, not once per execution. psycopg
#: prepares a statement only at its fifth execution, and PostgreSQL's default (`auto`) plans each
#: of a prepared statement's first five executions with its parameters before it trusts a generic
#: plan: a time-travel read's statement took 0.5 ms to plan for 0.15 ms of work, so a server's reads
#: paid that about ten times per statement on every pooled connection. The store's connections
#: prepare a statement at its second execution (`PREPARE_THRESHOLD`; a one-off read, as a CLI
#: command makes, is not prepared and costs no extra round trip) and keep its generic plan. Every
#: statement of the store looks rows up by key, by a key and a range under it, or in index order
#: under a LIMIT, where the generic plan is the plan the parameters would choose; a bare range
#: (`COUNT(*) … WHERE at > %s`) gets the index scan it got before.
GENERIC_PLANS = "-c plan_cache_mode=force_generic_plan"
PREPARE_THRESHOLD = 1


def login_options(schema: str) -> str:
    """libpq's `options` for the store's pooled connections: the schema to look in, when it can
    be given at login (`search_path_option`), and prepared statements planned once (`GENERIC_PLANS`)."""
    path = search_path_option(schema)
    return f"{path} {GENERIC_PLANS}" if path else GENERIC_PLANS


def sqlite_synchronous(conn: Any, relaxed: bool) -> None:
    """Set an eventsourcing SQLite connection's `synchronous` level for its next commit: NORMAL
    (written to the WAL, not flushed) when `relaxed`, else FULL. The level in force is kept on the
    connection and sent only when it changes; the events recorder (runtime/chain.py) and the read
    models share the pool's connections and this mark, so neither commits under the other's level."""
    level = 1 if relaxed else 2  # set on a connection's first commit, whatever its build's default
    if getattr(conn, "_chronicle_synchronous", None) != level:
        conn._sqlite_conn.execute(f"PRAGMA synchronous = {level}")
        conn._chronicle_synchronous = level


class Database:
    """The store's database seen through its tracking recorder's datastore."""

    def __init__(self, tracking: TrackingRecorder, events_table: str) -> None:
        self.tracking = tracking
        self.datastore: Any = tracking.datastore  # type: ignore[attr-defined]
        self.backend = "postgresql" if "postgres" in type(tracking).__module__ else "sqlite"
        self.schema = getattr(self.datastore, "schema", None) or "public"
        self.tracking_table = "tracking" if self.backend == "sqlite" else tracking.tracking_table_name  # type: ignore[attr-defined]
        self.events_table = events_table
        self.position_column = "rowid" if self.backend == "sqlite" else "notification_id"

    @contextmanager
    def transaction(self, commit: bool = True, pipelined: bool = False, relaxed: bool = False) -> Iterator[Tx]:
        """`pipelined` (PostgreSQL): the statements are sent without waiting for each one's answer,
        which is waited for only when a result is read (psycopg's pipeline mode). For many small
        writes, such as a batch of events applied to the read models: one round trip each was a
        fifth of a PostgreSQL rebuild. An error then surfaces at the next read or at the end.

        `relaxed`: the commit does not wait for the disk (SQLite `synchronous=NORMAL` in WAL mode,
        PostgreSQL `synchronous_commit` off for this transaction). For rows derived from the log:
        lost to a power cut, they go together with the position that says they were applied, and
        the next catch-up applies those events again."""
        if self.backend == "sqlite":
            with self.datastore.get_connection(commit=commit) as conn:
                if commit:
                    sqlite_synchronous(conn, relaxed)
                with conn.transaction(commit=commit) as cursor:
                    tx = Tx(cursor, self)
                    yield tx
                    tx.flush()
            return
        with self._connection() as conn, conn.transaction(force_rollback=not commit):
            tx = Tx(conn.cursor(), self, reader=conn.cursor() if pipelined else None)
            with conn.pipeline() if pipelined else nullcontext():
                if relaxed and commit:
                    tx.execute("SET LOCAL synchronous_commit TO OFF")  # pipelined: no round trip of its own
                yield tx
            tx.flush()  # outside the pipeline: COPY cannot run in one

    @contextmanager
    def statement(self) -> Iterator[Tx]:
        """For one read statement: on PostgreSQL it runs on its own (autocommit), without the
        BEGIN and ROLLBACK round trips a transaction adds; on SQLite it is a transaction."""
        if self.backend == "sqlite":
            with self.transaction(commit=False) as tx:
                yield tx
            return
        with self._connection() as conn, autocommitted(conn):
            yield Tx(conn.cursor(), self)  # the read opens no transaction to end

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        """A pooled PostgreSQL connection that already looks in the store's schema: at its login
        when the store's pool asks for it (`search_path_option`), else set once per connection,
        which saves a `SET LOCAL` round trip per transaction (every other statement on these
        connections names its schema). Set after the login, the plan mode of `GENERIC_PLANS`
        comes with it: a pooler that did not pass the login's options passed neither."""
        at_login = search_path_option(self.schema)
        with self.datastore.get_connection() as conn:
            if getattr(conn, "_chronicle_search_path", None) != self.schema and (
                    at_login is None or self.datastore.pool.kwargs.get("options") != login_options(self.schema)):
                from psycopg import sql as pgsql

                path = pgsql.Identifier(self.schema).as_string(conn)
                conn.execute("SELECT set_config('search_path', %s, false), set_config('plan_cache_mode', 'force_generic_plan', false)",
                             (path,), prepare=False)
                conn._chronicle_search_path = self.schema  # type: ignore[attr-defined]
            yield conn

    # -- positions -----------------------------------------------------------------------------

    def position(self, key: str) -> int | None:
        """The last log position applied under `key`, 0 if reset, None if never tracked."""
        return self.tracking.max_tracking_id(key)

    def positions(self, keys: Sequence[str], patient: bool = True, prefix: str | None = None) -> dict[str, int | None]:
        """`position` of each key in one statement: an engine over four projections read them
        one round trip each, at every command that opens the read models. A connection blip is
        ridden out as eventsourcing's `max_tracking_id` does, unless not `patient` (a caller
        that tells a blip from a missing table itself). With `prefix`, every other key that
        starts with it is read in the same statement too (the projections' other versions)."""
        if not patient:
            return self._positions(keys, prefix)
        from eventsourcing.persistence import InterfaceError, OperationalError  # not at import: `sessions` needs none of it
        from eventsourcing.utils import retry

        return retry((InterfaceError, OperationalError), max_attempts=10, wait=0.2)(self._positions)(keys, prefix)

    def _positions(self, keys: Sequence[str], prefix: str | None = None) -> dict[str, int | None]:
        if not keys:  # `IN ()` is not SQL
            return {}
        marks = ", ".join(["%s"] * len(keys))
        also, params = ("", tuple(keys)) if prefix is None else (" OR application_name LIKE %s", (*keys, like_prefix(prefix)))
        with self.statement() as tx:
            found = dict(tx.rows(
                f"SELECT application_name, MAX(notification_id) FROM {self.tracking_table} "
                f"WHERE application_name IN ({marks}){also} GROUP BY application_name", params,
            ))
        if prefix is not None:  # LIKE's `_` matches any character (and SQLite's LIKE ignores case)
            found = {key: value for key, value in found.items() if key in keys or key.startswith(prefix)}
        return {**found, **{key: found.get(key) for key in keys}}

    def keys_with_prefix(self, tx: Tx, prefix: str) -> list[str]:
        """The tracking keys that start with `prefix`, read in `tx`."""
        found = tx.rows(f"SELECT application_name FROM {self.tracking_table} WHERE application_name LIKE %s", (like_prefix(prefix),))
        return [key for (key,) in found if key.startswith(prefix)]

    def forget(self, tx: Tx, key: str) -> None:
        """`key`'s tracking row deleted in `tx`: what it tracked is gone."""
        tx.execute(f"DELETE FROM {self.tracking_table} WHERE application_name = %s", (key,))

    def lock_position(self, tx: Tx, key: str) -> int | None:
        """Take the write lock on `key`'s tracking row, then read it.

        A write as the transaction's first statement makes SQLite take its write lock before
        any read snapshot exists (so it waits instead of failing), and makes PostgreSQL lock
        the row, so two catch-ups never apply the same events twice.
        """
        tx.execute(f"UPDATE {self.tracking_table} SET notification_id = notification_id WHERE application_name = %s", (key,))
        return tx.value(f"SELECT notification_id FROM {self.tracking_table} WHERE application_name = %s", (key,))

    def advance(self, tx: Tx, key: str, position: int) -> None:
        """Move `key` forward in the same transaction as the rows; a replay raises IntegrityError."""
        from eventsourcing.persistence import Tracking

        self.tracking._insert_tracking(tx.cursor, Tracking(key, position))  # type: ignore[attr-defined]

    def reset(self, tx: Tx, key: str) -> None:
        self.forget(tx, key)
        self.advance(tx, key, 0)

    def originators_after(self, position: int, limit: int) -> list[str] | None:
        """The aggregate ids (as text) of the events after `position`, or None if more than `limit`."""
        with self.statement() as tx:
            found = tx.rows(
                f"SELECT originator_id FROM {self.events_table} WHERE {self.position_column} > %s "
                f"ORDER BY {self.position_column} LIMIT %s", (position, limit + 1),
            )
        return None if len(found) > limit else [str(r[0]).replace("-", "") for r in found]

    def originators_after_tracked(self, key: str, limit: int) -> list[str] | None:
        """`originators_after(position of key)` in one statement: the position is read inside it.
        A cold read of the past on PostgreSQL is mostly round trips; this saves one."""
        with self.statement() as tx:
            found = tx.rows(self.originators_after_tracked_sql(), (key, limit + 1))
        return None if len(found) > limit else [str(r[0]).replace("-", "") for r in found]

    def originators_after_tracked_sql(self) -> str:
        """`originators_after_tracked`'s query (parameters: the key, the limit + 1), for a reader
        that reads the lag in the statement that reads its rows: one snapshot, one round trip."""
        return (f"SELECT originator_id FROM {self.events_table} WHERE {self.position_column} > "
                f"(SELECT COALESCE(MAX(notification_id), 0) FROM {self.tracking_table} WHERE application_name = %s) "
                f"ORDER BY {self.position_column} LIMIT %s")

    def count_after(self, position: int) -> int:
        """Events in the log after `position`: a projection's lag."""
        with self.statement() as tx:
            return int(tx.value(f"SELECT COUNT(*) FROM {self.events_table} WHERE {self.position_column} > %s", (position,)) or 0)
