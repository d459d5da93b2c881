"""PostgreSQL: opening a store asks the server only what the open needs, and says at once what no wait cures.

eventsourcing's aggregate recorder looks up its composite row type (`stored_event_uuid`) in the
catalog when it is built, on a pooled connection, so that its insert can send rows of that type.
Of Chronicle's two recorders only the snapshots' insert sends them (the events are saved by our
own function, runtime/chain_postgres.py), and most opens write no snapshot: a CLI read, a fork,
a turn under a hundred events. The lookup cost every open a round trip into a cold catalog
(≈ 1.7 ms on a new server process here) and, asked while the pool was still making its first
connection, a second connection. It is made now by the first snapshot a process writes, on the
connection that writes it.

The pool makes its connections in the background and, when the server refuses one, tries again
until the client's timeout (`CHRONICLE_PG_CONNECT_TIMEOUT`, 5 s): a restart in progress is ridden
out. A database, role or password that does not exist is not cured by waiting, and a user who
mistyped one waited the whole timeout to be told so. `first_connection` waits briefly, then asks
the server once directly and raises such an answer at once; anything else goes on waiting, after
a warning that says what it waits for.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from eventsourcing.persistence import OperationalError, PersistenceError, StoredEvent
from eventsourcing.postgres import PostgresAggregateRecorder
from psycopg.sql import SQL, Identifier
from psycopg.types.composite import CompositeInfo, register_composite

from .shred_marks import KEYS_TABLE, refuse_forgotten_postgres, trees_of
from .store_errors import StoreUnavailable

log = logging.getLogger(__name__)


def defer_composite_types(datastore: Any) -> None:
    """Recorders built on `datastore` leave their composite types unregistered (`SnapshotRecorder`
    registers its own when it first inserts). Only while eventsourcing's stored functions are off:
    with them on, every insert sends the composite type."""
    if datastore.enable_db_functions:
        return
    datastore.register_type_adapters = _not_yet


def logs_in_to_schema(datastore: Any) -> None:
    """The pool's connections log in looking in the store's schema and keeping a prepared
    statement's generic plan (libpq `options`, `projections.sql.login_options`), and prepare what
    they run a second time (`projections.sql.PREPARE_THRESHOLD`): the read models' SQL names no
    schema, and a `SET` after each login was a round trip more on every new connection, the first
    read of every command among them."""
    from chronicle.projections.sql import PREPARE_THRESHOLD, login_options

    datastore.pool.kwargs["options"] = login_options(datastore.schema or "public")
    datastore.pool.kwargs["prepare_threshold"] = PREPARE_THRESHOLD


def keep_login_options_if_held(datastore: Any, search_path: str) -> None:
    """The pool stops sending its login options if they did not hold (`search_path` is the setting
    on a connection that logged in with them): a pooler such as PgBouncer with
    `ignore_startup_parameters = options` logs in without them, and the read models' statements,
    which name no schema, would have read and written the default search path's tables, another
    store's perhaps. Without them, each connection sets its search path once, before its first
    read (`projections.sql.Database._connection`)."""
    from chronicle.projections.sql import search_path_option

    options, schema = datastore.pool.kwargs.get("options"), datastore.schema or "public"
    wanted = search_path_option(schema)
    if not options or wanted is None or wanted not in options or search_path == schema:
        return
    del datastore.pool.kwargs["options"]
    log.info("PostgreSQL ignored the login options (%s): each connection sets its search path after its login", options)


#: What PgBouncer answers a login that carries libpq `options` it was not told to ignore.
REFUSED_OPTIONS = "unsupported startup parameter"


def _not_yet() -> None:
    """Stands in for `PostgresDatastore.register_type_adapters` at a recorder's construction."""


class SnapshotRecorder(PostgresAggregateRecorder):
    """eventsourcing's aggregate recorder (the snapshots table), which registers its row type the
    first time it inserts rather than when it is built.

    A snapshot sealed with a session tree's key is inserted only while that key is alive, checked in
    the insert's own statement: the key's row is locked FOR SHARE, which `TreeKeys.destroy` (an UPDATE
    of that row) waits for and which waits for it, so a snapshot and a forget are strictly ordered, as
    an event save and a forget are (runtime/shred_marks.py). One statement, as the plain insert is: no
    round trip more than before, and one fewer than reading the key row first."""

    def _insert_stored_events(self, curs: Any, stored_events: Sequence[StoredEvent], **kwargs: Any) -> None:
        datastore, name = self.datastore, self.stored_event_type_name
        conn = curs.connection
        info = datastore.psycopg_type_adapters.get(name)
        if info is None:
            # Quoted: eventsourcing's own lookup passes "schema.name" as one string, which a schema
            # name that needs quoting (`?schema=My-Schema`) turns into a syntax error.
            info = CompositeInfo.fetch(conn, Identifier(datastore.schema or "public", name))
            if info is not None:
                register_composite(info, conn)
                datastore.psycopg_type_adapters[name] = info  # `get_connection` registers it on every other connection
                datastore.psycopg_python_types[name] = info.python_type
        elif not conn.adapters.types.get(info.oid):
            register_composite(info, conn)
        trees = sorted(trees_of(s.state for s in stored_events))
        if not trees:
            super()._insert_stored_events(curs, stored_events, **kwargs)
            return
        rows = [self.construct_pg_stored_event(s.originator_id, s.originator_version, s.topic, s.state) for s in stored_events]
        curs.execute(self._guarded_insert(), ([str(t) for t in trees], rows, len(trees)))
        if curs.rowcount == 0:
            refuse_forgotten_postgres(curs, self._keys_table(), trees)

    def _keys_table(self) -> str:
        return f'"{self.datastore.schema or "public"}"."{KEYS_TABLE}"'

    def _guarded_insert(self) -> Any:
        schema = Identifier(self.datastore.schema or "public")
        return SQL(
            "WITH alive AS (SELECT count(*) AS n FROM (SELECT 1 FROM {keys} WHERE tree_id = ANY(%s) AND wrapped IS NOT NULL "
            "FOR SHARE) AS k) "
            "INSERT INTO {schema}.{table} (originator_id, originator_version, topic, state) "
            "SELECT e.originator_id, e.originator_version, e.topic, e.state FROM alive, unnest(%s::{schema}.{kind}[]) AS e "
            "WHERE alive.n = %s"
        ).format(keys=SQL(self._keys_table()), schema=schema, table=Identifier(self.events_table_name),
                 kind=Identifier(self.stored_event_type_name))


#: Seconds the first client waits for the pool before the server is asked why (a login takes a few ms).
QUICK_S = 0.5
#: What the server says at login when waiting cannot help (libpq's messages carry no SQLSTATE for
#: these): no such database; or no such role, a wrong or missing password, no pg_hba.conf entry.
NO_DATABASE = re.compile(r'database "[^"]*" does not exist')
BAD_LOGIN = re.compile(r'role "[^"]*" does not exist|authentication failed|no password supplied|no pg_hba.conf entry')
#: libpq's words for TLS (or GSSAPI) settings the server, its certificate or the client's files do not meet, as the
#: URL's `?sslmode=` and other options (runtime/pg_options.py) or the PGSSL* variables asked: `sslmode=require` on
#: a server without TLS waited out the whole connect timeout, said as a server "not answering", before failing.
TLS_REFUSED = re.compile(r"server does not support (?:SSL|GSS)|certificate verify failed|root certificate file|"
                         r"could not (?:read|load|open) (?:certificate|private key|root certificate|SSL certificate revocation)|"
                         r"private key file|certificate present, but not private key|server certificate for .* does not match|"
                         r"channel binding (?:is )?required|GSSAPI encryption required", re.IGNORECASE)


#: The database exists but takes no logins now: `ALTER DATABASE … ALLOW_CONNECTIONS false` (maintenance), or the
#: user lacks its CONNECT privilege. Each was waited out as a server "not answering" (the whole connect timeout),
#: then said as the pool's "couldn't get a connection", not as the server's reason.
CLOSED_DATABASE = re.compile(r'database "[^"]*" is not currently accepting connections|permission denied for database')


#: The server is at a connection limit (SQLSTATE 53300, which libpq's login error does not carry): its own
#: max_connections, the slots it keeps for superusers, or the role's or the database's CONNECTION LIMIT. The pool
#: retried it until its timeout, so `serve` held each request 52 s, then answered "couldn't get a connection", and the
#: CLI waited 5 s to call a server that answers "not answering". Told at once now, in the server's words: a freed
#: connection cures it, which the one direct login a second asks (`fails_fast_when_refused`) sees.
TOO_MANY = re.compile(r"too many clients already|too many connections for (?:role|database)|"
                      r"remaining connection slots are reserved|connection limit exceeded", re.IGNORECASE)


def refusal(text: str) -> str | None:
    """Which refusal no wait cures the server's message names: "database", "closed", "full", "login", "tls", or None.
    One reading for the open (`first_connection`) and for the CLI's advice (`store_open.postgres_advice`). "full" (a
    connection limit) may pass as others disconnect, but not within the client's wait, which only hid the reason."""
    if NO_DATABASE.search(text):
        return "database"
    if CLOSED_DATABASE.search(text):
        return "closed"
    if TOO_MANY.search(text):
        return "full"
    if BAD_LOGIN.search(text):
        return "login"
    if TLS_REFUSED.search(text):
        return "tls"
    return None


@contextmanager
def first_connection(datastore: Any) -> Iterator[Any]:
    """`datastore.get_connection()` for the open's first statements: the same connection, errors
    and overall timeout, except that a refusal no wait cures (`refusal`) is raised after `QUICK_S`."""
    pool = datastore.pool
    patience = pool.timeout
    started = time.monotonic()
    acquired = False
    pool.timeout = min(QUICK_S, patience)
    try:
        with datastore.get_connection() as conn:
            acquired, pool.timeout = True, patience
            yield conn
            return
    except OperationalError as exc:
        if acquired or "couldn't get a connection" not in str(exc) or QUICK_S >= patience:
            raise
    finally:
        pool.timeout = patience
    cause, final = _direct_attempt(pool.kwargs, patience)
    if final:
        raise OperationalError(cause)
    if REFUSED_OPTIONS in cause and "options" in pool.kwargs:
        # A pooler that refuses the login options: the pool logs in without them from its next
        # attempt, and each connection sets its search path after its login.
        del pool.kwargs["options"]
        log.warning("PostgreSQL at %s:%s refused the login options (%s); going on without them. A pooler such as "
                    "PgBouncer: add `options` to its ignore_startup_parameters to skip this wait",
                    pool.kwargs.get("host"), pool.kwargs.get("port"), _short(cause))
        cause = ""
    # A slow or restarting server: the rest of the wait, as the pool alone would have waited.
    pool.timeout = max(0.1, patience - (time.monotonic() - started))
    if cause:  # said once, so a command that seems to hang says what it waits for
        kwargs = pool.kwargs
        log.warning("PostgreSQL at %s:%s is not answering (%s); waiting up to %.0f s more for it (CHRONICLE_PG_CONNECT_TIMEOUT)",
                    kwargs.get("host"), kwargs.get("port"), _short(cause), pool.timeout)
    acquired = False
    try:
        with datastore.get_connection() as conn:
            acquired, pool.timeout = True, patience
            yield conn
    except OperationalError as exc:
        if acquired or not cause or "couldn't get a connection" not in str(exc):
            raise
        # Still no connection: the server's own reason, which the direct attempt already has, rather
        # than the pool's "couldn't get a connection" (which sent the CLI to log in once more to learn it).
        raise OperationalError(cause) from exc
    finally:
        pool.timeout = patience


def _direct_attempt(kwargs: dict[str, Any], timeout: float) -> tuple[str, bool]:
    """Why one direct login fails ("" if it does not), and whether no wait cures that (`refusal`)."""
    import psycopg

    from .pg_options import connect, pool_login

    try:
        connect(pool_login(kwargs), connect_timeout=max(1, int(timeout))).close()  # as the pool logs in, its options included
    except psycopg.Error as exc:
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        return first, refusal(text) is not None
    return "", False


def _short(cause: str) -> str:
    """libpq's reason without the address it repeats ("connection to server at … failed: ")."""
    return cause.rsplit("failed: ", 1)[-1]


class DatabaseRefused(StoreUnavailable, PersistenceError):
    """The server refuses the store's logins in a way no wait cures (`refusal`: the database was
    dropped, the role removed, the password changed). Not an OperationalError, so eventsourcing's
    recorders do not retry it: the caller learns it at once."""


class DatabaseReplaced(StoreUnavailable, PersistenceError):
    """The store's database was dropped and created again (a restore, say) after this process first used it. The
    process holds sessions read from the old one, and their next events would land on the new log at versions
    that do not follow what is there; nothing more is read or written until a restart reads the store as it is."""


#: What a new connection asks to learn which database it reached (the name alone survives a drop and a create).
DATABASE_OID = "SELECT oid FROM pg_database WHERE datname = current_database()"

#: Seconds a verdict that the server refuses the store's logins holds before one login asks again.
VERDICT_S = 1.0


def fails_fast_when_refused(datastore: Any) -> None:
    """For a long-lived process (the server, a worker): a pool that cannot connect asks the server once why,
    and a refusal no wait cures is `DatabaseRefused` rather than a retry of the whole wait.

    A database dropped under `chronicle serve` held each request for ten pool timeouts (52 s),
    then answered 500. Now a request waits for a connection in slices of `QUICK_S`; when the pool's
    own logins failed during one, a direct login asks why, and a refusal is told at once (to the
    requests after it too; one login a second re-asks, so a database created again is used again).
    A pool that is only busy, or a slow or restarting server, is waited for the pool's timeout.
    The first request after a drop used to wait that whole timeout (5 s) whenever the pool's login
    for a new connection had not yet failed when the request began.

    Such a process also holds sessions it read, so it asks each new connection which database it
    reached (`DATABASE_OID`, once per connection made): one dropped and created again under it (a
    restore) is `DatabaseReplaced` from then on (`datastore.replaced()`), rather than events written
    onto another log. Before, it wrote on once the new database had the tables."""
    if getattr(datastore, "fails_fast_when_refused", False):
        return  # one wrapper is enough (a program's second `Chronicle.work` on one store)
    datastore.fails_fast_when_refused = True
    acquire = datastore.get_connection
    pool = datastore.pool
    lock = threading.Lock()
    known: dict[str, Any] = {"cause": "", "at": 0.0, "errors": 0, "made": -1, "oid": None, "replaced": ""}
    waits = threading.local()  # this thread's wait for the pool, when shorter than the pool's own
    plain_connection = pool.connection

    def connection(timeout: float | None = None) -> Any:
        return plain_connection(timeout if timeout is not None else getattr(waits, "timeout", None))

    pool.connection = connection  # eventsourcing's get_connection asks `pool.connection()` with no timeout

    def connection_errors() -> int:
        return int(pool.get_stats().get("connections_errors", 0))

    def at_full_size() -> bool:
        stats = pool.get_stats()
        return bool(stats["pool_size"] >= stats["pool_max"])

    def same_database(conn: Any) -> None:
        """After the pool made a connection since the last look (the only way to reach another database of the
        same name: a drop ends every session on it), which database it reached: the first one this process used,
        or DatabaseReplaced, kept for every request after."""
        made = int(pool.get_stats().get("connections_num", 0))
        if made == known["made"]:
            return
        row = conn.execute(DATABASE_OID).fetchone()
        oid = row[0] if not isinstance(row, dict) else row["oid"]
        with lock:
            known["made"] = made
            known["oid"] = known["oid"] if known["oid"] is not None else oid
            if oid != known["oid"]:
                known["replaced"] = (f"the database {pool.kwargs.get('dbname')!r} was dropped and created again after this "
                                     "process first used it (a restore?); restart the process to use it as it is now")
        if known["replaced"]:
            raise DatabaseReplaced(known["replaced"])

    def still_refused() -> str:
        """The refusal to report now, if any: asked of the server when one is known and old, or
        when the pool's own attempts to connect have failed since the last look (psycopg_pool's
        `connections_errors`), so a request does not first wait a pool timeout to learn it."""
        with lock:
            errors = connection_errors()
            failing, known["errors"] = errors > known["errors"], errors
            if (known["cause"] or failing) and time.monotonic() - known["at"] > VERDICT_S:
                cause, final = _direct_attempt(pool.kwargs, 2)
                known.update(cause=cause if final else "", at=time.monotonic())
            return str(known["cause"])

    def refused_now() -> str:
        """The refusal a direct login is told now, if no wait cures it ("" otherwise); kept for the
        requests after this one."""
        cause, final = _direct_attempt(pool.kwargs, 2)
        if not final:
            return ""
        with lock:
            known.update(cause=cause, at=time.monotonic())
        return cause

    @contextmanager
    def get_connection(*args: Any, **kwargs: Any) -> Iterator[Any]:
        if known["replaced"]:
            raise DatabaseReplaced(known["replaced"])
        cause = still_refused()
        if cause:
            raise DatabaseRefused(_refused(cause))
        patience = float(pool.timeout)
        deadline, errors_seen = time.monotonic() + patience, connection_errors()
        while True:  # the pool's timeout in slices of QUICK_S, looking at its logins after each
            remaining = deadline - time.monotonic()
            # A pool at its size makes no login a request could wait on: one wait, keeping its place in the
            # pool's queue (a waiter that gives up and asks again goes to the back of it).
            last = remaining <= QUICK_S or at_full_size()
            acquired = False
            waits.timeout = max(0.1, remaining if last else QUICK_S)
            try:
                with acquire(*args, **kwargs) as conn:
                    acquired, waits.timeout = True, None
                    same_database(conn)
                    yield conn
                    return
            except OperationalError as exc:
                if acquired or "couldn't get a connection" not in str(exc):
                    raise
                errors = connection_errors()
                failing, errors_seen = errors > errors_seen, errors
                cause = refused_now() if failing or last else ""
                if cause:
                    raise DatabaseRefused(_refused(cause)) from exc
                if last:
                    raise OperationalError(f"couldn't get a connection after {patience:.2f} sec") from exc
            finally:
                waits.timeout = None

    datastore.get_connection = get_connection
    datastore.replaced = lambda: DatabaseReplaced(known["replaced"]) if known["replaced"] else None


def _refused(cause: str) -> str:
    return "the database refuses the store's connections: " + re.sub(r"^FATAL:\s+", "", _short(cause))
