"""`sessions` from the read models when they are current: over a bare connection for a command
that has not opened the store, on the open store's pooled connection for the server and library.

Why: opening the store means building eventsourcing's Application and importing the domain,
whose ~220 event classes eventsourcing turns into dataclasses; that import was about half of
`chronicle sessions`. When the summaries and cost projections have applied every event in the
log, their tables already hold every column of the listing, so this reads them with plain SQL
(sqlite3 or psycopg) and nothing else. Whenever that is not certain — a projection behind the
log or never built, an encrypted store, an event the projections passed over, any driver
error — it answers None and the caller takes the aggregate path (`queries.sessions`), which
catches the projections up and says what is wrong exactly as before.
"""

from __future__ import annotations

import json
import os
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Sequence
from uuid import UUID, uuid5

from chronicle.projections.cost_report import COST_KEY, Rows
from chronicle.projections.session_listing import SUMMARIES_KEY, Deferred, listed_ids, session_rows
from chronicle.projections.sql import NUL_ESCAPE, unescape_nul

from ..config import ConfigError, eventsourcing_env, sqlite_busy_timeout, sqlite_path
from ..lease_holders import holder_gone
from ..stored_state import decompress

#: The projections whose tables the listing reads: both must have applied the whole log.
KEYS = (SUMMARIES_KEY, COST_KEY)


@dataclass(frozen=True)
class Listing:
    rows: list[dict[str, Any]]
    #: Every indexed session id, archived ones too (for unique prefixes and the "all archived" line).
    all_ids: list[str]


class Connection:
    """One read transaction on the store's database, `%s` placeholders on both backends."""

    def __init__(self, raw: Any, backend: str) -> None:
        self.raw = raw
        self.backend = backend

    def dicts(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        if self.backend == "sqlite":
            cursor = self.raw.execute(sql.replace("%s", "?"), tuple(params))
        else:
            cursor = self.raw.execute(sql, tuple(params))
        names = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
        if self.backend != "sqlite" and any(NUL_ESCAPE in v for row in rows for v in row if type(v) is str):
            rows = [tuple(unescape_nul(v) for v in row) for row in rows]  # as projections/sql.py stores NUL on PostgreSQL
        return [dict(zip(names, row, strict=True)) for row in rows]


def current_listing(url: str, archived: bool = False) -> Listing | None:
    """The listing if the read models are current and can say it all, else None (read the aggregates).
    For a command that has not opened the store: a bare connection of its own."""
    if _keyed():
        return None  # the key is checked against the store where the store is opened
    return _answered(lambda: _read_bare(url, archived))


def open_store_listing(engine: Any, archived: bool = False) -> Listing | None:
    """`current_listing` on an open store's own pooled connection (the projection engine's database):
    the server and library programs list sessions per page view, and a login of its own each time was
    a new PostgreSQL backend (its connection, then every table opened afresh) per page."""
    if _keyed():
        return None
    return _answered(lambda: _read_pooled(engine.db, archived))


def _keyed() -> bool:
    return bool(os.environ.get("CHRONICLE_CIPHER_KEY", "").strip() or os.environ.get("CHRONICLE_CIPHER_KEY_FILE", "").strip())


def _answered(read: Callable[[], Listing | None]) -> Listing | None:
    try:
        return read()
    except (Deferred, ConfigError, OSError):  # the aggregate path reports what is wrong
        return None
    except Exception as exc:  # the driver's errors, without importing the other backend's driver
        if type(exc).__module__.startswith(("psycopg", "sqlite3")):
            return None
        raise


def _read_bare(url: str, archived: bool) -> Listing | None:
    with _connect(url) as (conn, events_table, tracking_table, position):
        return _listing(conn, events_table, tracking_table, position, archived, conn.backend)


def _read_pooled(db: Any, archived: bool) -> Listing | None:
    with db.transaction(commit=False) as tx:
        if db.backend != "sqlite":  # one snapshot: positions, head and rows agree (SQLite's read transaction is one)
            tx.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        return _listing(tx, db.events_table, db.tracking_table, db.position_column, archived, db.backend)


def _listing(conn: Rows, events_table: str, tracking_table: str, position: str, archived: bool, backend: str) -> Listing | None:
    if not _plain(conn, events_table, position) or not _current(conn, events_table, tracking_table, position):
        return None
    now = datetime.now(timezone.utc)
    return Listing(session_rows(conn, archived=archived, held=lambda sid: _held(conn, events_table, backend, sid, now)),
                   listed_ids(conn))


#: The session lease's events (domain/lease.py), by the topics they are stored under.
LEASE_TOPIC = "chronicle.domain.lease:SessionLease."


def _held(conn: Rows, events_table: str, backend: str, sid: str, now: datetime) -> bool:
    """Whether a live process holds the session's lease now, read from its stored events as runtime/leases.py's
    `held_by_a_live_process` reads the aggregate (which this module does not import): its last event is an Acquired or
    a Renewed whose expiry is still ahead, and the holder that acquired it is not a process of this machine that is
    gone. Asked only of a turn in flight that a process should be running: one or two indexed reads of one lease."""
    lease = uuid5(UUID(sid), "lease")  # domain/ids.py: lease_id
    key: Any = lease.hex if backend == "sqlite" else lease
    where = f"FROM {events_table} WHERE originator_id = %s"
    last = conn.dicts(f"SELECT topic, state {where} ORDER BY originator_version DESC LIMIT 1", [key])
    if not last or last[0]["topic"] not in (LEASE_TOPIC + "Acquired", LEASE_TOPIC + "Renewed"):
        return False  # never taken, or released
    state = _state(last[0]["state"])
    if last[0]["topic"] == LEASE_TOPIC + "Renewed":
        acquired = conn.dicts(f"SELECT state {where} AND topic = %s ORDER BY originator_version DESC LIMIT 1",
                              [key, LEASE_TOPIC + "Acquired"])
        holder = _state(acquired[0]["state"]).get("holder") if acquired else None
    else:
        holder = state.get("holder")
    expires = (state.get("expires_at") or {}).get("_data_")
    if expires is None:
        return False
    until = datetime.fromisoformat(expires)
    return (until if until.tzinfo else until.replace(tzinfo=timezone.utc)) > now and not holder_gone(holder)


def _state(stored: Any) -> dict[str, Any]:
    found = json.loads(decompress(bytes(stored)))
    return found if isinstance(found, dict) else {}


@contextmanager
def _connect(url: str) -> Iterator[tuple[Connection, str, str, str]]:
    """(connection, events table, tracking table, position column) inside one read-only snapshot."""
    path = sqlite_path(url)
    if path is not None:
        if not path.is_file():
            raise OSError(f"no store at {path}")
        import sqlite3  # here, not at import: a PostgreSQL store's listing never loads it

        with closing(sqlite3.connect(path, timeout=sqlite_busy_timeout(), isolation_level=None)) as raw:
            raw.execute("BEGIN")  # one snapshot: positions, head and rows agree
            try:
                yield Connection(raw, "sqlite"), "stored_events", "tracking", "rowid"
            finally:
                raw.execute("ROLLBACK")
        return
    from psycopg import IsolationLevel, sql

    from ..pg_options import connect, login

    schema = eventsourcing_env(url).get("POSTGRES_SCHEMA") or "public"
    with connect(login(url)) as raw:
        raw.isolation_level = IsolationLevel.REPEATABLE_READ  # one snapshot: positions, head and rows agree
        raw.read_only = True
        # Set after the login, not in it (libpq `options`): a pooler such as PgBouncer refuses that
        # login, or drops the setting and reads whatever tables the default search path finds.
        raw.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
        yield Connection(raw, "postgresql"), "chronicle_events", "chronicle_tracking", "notification_id"
        raw.rollback()


def _plain(conn: Rows, events_table: str, position: str) -> bool:
    """Whether the store's first event reads without a key, as the store's own open checks
    (runtime/encryption.py): an encrypted store opened without its key is an error, not a listing."""
    first = conn.dicts(f"SELECT state FROM {events_table} ORDER BY {position} LIMIT 1")
    if not first:
        return True
    try:
        json.loads(decompress(bytes(first[0]["state"])))
    except Exception:  # noqa: BLE001 - ciphertext is neither JSON nor a zlib stream of it: encrypted
        return False
    return True


def _current(conn: Rows, events_table: str, tracking_table: str, position: str) -> bool:
    """Whether both projections have applied every event in the log, and their tables are this version's: a
    tracking row of another version beside this one's (an upgrade rolled back) means the tables may be that
    version's, which the projection engine builds again before anything reads them (projections/engine.py: ensure)."""
    head = conn.dicts(f"SELECT MAX({position}) AS head FROM {events_table}")[0]["head"] or 0
    families = [key.rsplit(":v", 1)[0] + ":v" for key in KEYS]
    found = conn.dicts(f"SELECT application_name, notification_id FROM {tracking_table} WHERE "
                       + " OR ".join(["application_name LIKE %s"] * len(families)), [f"{family}%" for family in families])
    positions = {r["application_name"]: r["notification_id"] for r in found if r["application_name"].startswith(tuple(families))}
    return set(positions) == set(KEYS) and all(positions[key] >= head for key in KEYS)


def tree_order(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """Sub-agent sessions right under their parent, oldest first at every level."""
    ids = {row["session_id"] for row in rows}
    children: dict[str | None, list[dict[str, Any]]] = {}
    for row in rows:
        parent = row["parent_session_id"] if row["parent_session_id"] in ids else None
        children.setdefault(parent, []).append(row)
    ordered: list[tuple[dict[str, Any], int]] = []

    def visit(parent: str | None, depth: int) -> None:
        for row in children.get(parent, []):
            ordered.append((row, depth))
            visit(row["session_id"], depth + 1)

    visit(None, 0)
    return ordered
