"""How the store says what went wrong: an id naming nothing, a row that does not decode or is gone, a
write refused by a read-only database.

Apart from store.py (which re-exports them) because every command's error handler asks them, and
importing the store imports the domain: `sessions` answered from the read models never needs it.
"""

from __future__ import annotations

import re
from uuid import UUID


def is_read_only_error(exc: BaseException) -> bool:
    """A write refused because the database (its file, directory or mount) is read-only."""
    text = str(exc).lower()
    return any(sign in text for sign in ("readonly database", "read-only file system", "read only transaction",
                                         "read-only transaction"))


#: The words of a PostgreSQL connection that failed or was lost (the pool's, libpq's, the server's), after
#: eventsourcing's retries: an outage, not a bug.
_CONNECTION_LOST = ("couldn't get a connection", "connection refused", "could not connect", "connection to server",
                    "server closed the connection", "terminating connection", "the database system is",
                    "connection is lost", "connection is closed", "consuming input failed")


def is_connection_lost(exc: BaseException) -> bool:
    """A store error that says the database server could not be reached or dropped the connection, once
    eventsourcing's retries were spent: said as "the store is unavailable", never as an internal error (a chat
    left open while PostgreSQL stopped said "internal error: OperationalError: couldn't get a connection")."""
    if type(exc).__name__ not in ("OperationalError", "InterfaceError"):
        return False
    if not type(exc).__module__.startswith(("eventsourcing", "psycopg")):
        return False
    text = str(exc).lower()
    return any(sign in text for sign in _CONNECTION_LOST)


def is_driver_connection_error(exc: BaseException) -> bool:
    """psycopg's own OperationalError or InterfaceError, raised by a connection of ours that eventsourcing does not
    wrap (the control listener's): the database or the link to it failed, not the code. Looked up among the loaded
    modules, so that asking imports nothing: if psycopg is not loaded, no error of its can have been raised."""
    import sys

    psycopg = sys.modules.get("psycopg")
    return psycopg is not None and isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))


#: SQLite's words for a file whose pages do not hold together (SQLITE_CORRUPT): a disk, a copy or a crash damaged it.
_DAMAGED = ("database disk image is malformed", "malformed database schema")
#: A store's driver saying its disk is full (SQLite; PostgreSQL's `could not extend file … No space left on device`).
DISK_FULL = re.compile(r"database or disk is full|No space left on device|could not extend file", re.IGNORECASE)


def _from_driver(exc: BaseException) -> bool:
    """Raised by the database's driver or eventsourcing's wrapper of it, not by a program with the same words."""
    return type(exc).__module__.startswith(("eventsourcing", "sqlite3", "psycopg"))


def is_damaged(exc: BaseException) -> bool:
    """The store's SQLite file is damaged: every use of the damaged pages fails, whatever the command; no retry cures it."""
    return _from_driver(exc) and any(sign in str(exc) for sign in _DAMAGED)


def is_disk_full(exc: BaseException) -> bool:
    return _from_driver(exc) and DISK_FULL.search(str(exc)) is not None


def is_locked(exc: BaseException) -> bool:
    """Another process held SQLite's write lock for the whole busy timeout (CHRONICLE_SQLITE_BUSY_TIMEOUT)."""
    return _from_driver(exc) and "database is locked" in str(exc)


def damage_advice(path: object) -> str:
    """What to do about a damaged SQLite store: one wording for every command's error line, `doctor` and the open."""
    return (f"copy out what it still holds (`sqlite3 {path} .recover | sqlite3 NEW.db`), then run `chronicle projections "
            "rebuild` and `chronicle verify` on NEW.db (--db), or restore a backup (docs/deployment.md, Backups)")


class StoreDamaged(Exception):
    """A SQLite store whose file is damaged (a SQLite file by its header, whose pages do not hold together): exit 1
    and what to do, never "not an SQLite database" (exit 2), which invited the user to point elsewhere and abandon it."""


class StoreUnavailable(Exception):
    """Mixed into a store error that says the store cannot be used now and why (its database refuses logins or was
    dropped and created again, its file is gone from its path): every client says it as one line, "the store is unavailable: …" (exit 1,
    ChronicleError code 1, HTTP 503), never as an internal error. A mixin, so that this module imports nothing:
    the classes are eventsourcing PersistenceErrors too, which the loop and the worker catch as a lost store."""


class NotFound(LookupError):
    """An id that names nothing in this store."""


class UnknownSession(NotFound):
    """A session id as typed (empty, unknown or an ambiguous prefix): a bad argument, so the CLI
    exits 2 for it like for any other usage error, while a missing aggregate found *inside* the
    store stays a plain NotFound."""


class ForgottenSession(NotFound):
    """An aggregate of a session tree that `chronicle forget` erased: the id is right, its content is
    gone. One answer in every path, whichever process forgot it and whatever this one remembers: exit 1
    (as a write refused in a running process), `ChronicleError` code 1, HTTP 409; never the usage
    error (exit 2) of an id that names nothing."""

    forgotten = True


class UnreadableEvent(Exception):
    """A stored event this code cannot decode: named by aggregate, version and topic, so that
    one damaged row is reported as itself instead of failing whatever happened to read it."""


def unreadable_event(kind: str, aggregate_id: UUID, version: int, topic: str, error: BaseException) -> UnreadableEvent:
    """The one line every reader gives for an event that does not decode (`history`, `log`, `replay`, …)."""
    first = str(error).splitlines()[0] if str(error) else ""
    return UnreadableEvent(f"{kind.lower()} {aggregate_id}: event {version} ({topic}) cannot be decoded: "
                           f"{type(error).__name__}: {first}; `chronicle doctor` lists every such event")


class MissingEvents(UnreadableEvent):
    """Versions of an aggregate gone from the log (a row deleted by hand): the events after them cannot be
    applied, so the aggregate cannot be read. An UnreadableEvent because every reader that reports or passes
    over a row it cannot read (the listings, self-repair, the CLI's and the library's error line, the HTTP
    answer) must treat a missing one alike; it used to surface as eventsourcing's bare
    `OriginatorVersionError: (4, 3)`, an internal error naming neither the aggregate nor the cure."""


def version_gap(aggregate: object, event: object) -> MissingEvents | None:
    """The MissingEvents that applying `event` to `aggregate` (None: nothing applied yet) failed on, or None
    if the failure was something else. Asked only after the apply failed, so a read that succeeds pays nothing."""
    version = getattr(event, "originator_version", None)
    held = getattr(aggregate, "version", 0) if aggregate is not None else 0
    if not isinstance(version, int) or not isinstance(held, int) or version <= held + 1:
        return None
    kind = type(aggregate).__name__ if aggregate is not None else type(event).__qualname__.split(".")[0]
    return missing_events(kind, getattr(event, "originator_id", "?"), held + 1, version - 1)


def missing_events(kind: str, aggregate_id: object, first: int, last: int) -> MissingEvents:
    """The one line every reader gives for a hole in an aggregate's versions (`history`, `log`, `export`, …)."""
    versions = f"event {first} is" if first == last else f"events {first}-{last} are"
    after = f"event {last + 1} follows event {first - 1}" if first > 1 else f"its first event is event {last + 1}"
    return MissingEvents(f"{kind.lower()} {aggregate_id}: {versions} missing from the store ({after}: a row was "
                         "deleted); `chronicle verify` names where the log was cut, `chronicle doctor` lists every such gap")
