"""SQLite connections that keep their compiled statements between transactions.

eventsourcing 9.5.6 opens each pooled SQLite connection with `cached_statements=True`, which the
`sqlite3` module takes as a cache of one statement. A transaction sends BEGIN, its statements and
COMMIT or ROLLBACK, so no statement survived to its next use and each was compiled again every
time: compiling `history --at`'s read (four parts, a cut and the projection's lag) was three
quarters of the read (0.30 against 0.09 ms), and a loop step's inserts, chain link and commit were
compiled afresh at every step. This pool opens its connections as eventsourcing does in every other
respect, with the `sqlite3` module's own default cache. A statement compiled against an older
schema is recompiled by SQLite itself (`sqlite3_prepare_v2`), so a cached one never runs stale.
"""

from __future__ import annotations

import os
import sqlite3
from typing import Any
from urllib.parse import unquote, urlsplit

from eventsourcing.persistence import InterfaceError, PersistenceError
from eventsourcing.sqlite import SQLITE3_DEFAULT_LOCK_TIMEOUT, SQLiteConnection, SQLiteConnectionPool

from .store_errors import StoreUnavailable

#: Compiled statements kept per connection: the `sqlite3` module's default, several times the
#: number of distinct statements a store sends.
STATEMENT_CACHE = 128


def connect(db_name: str, lock_timeout: int | None) -> sqlite3.Connection:
    """A connection to a store's file as eventsourcing opens one (a URI name, autocommit: its
    transactions send BEGIN themselves, usable from any thread), keeping its compiled statements.
    The pool's connections and the steering probe's own (runtime/store_rows.py) are opened here."""
    return sqlite3.connect(database=db_name, uri=True, check_same_thread=False, isolation_level=None,
                           cached_statements=STATEMENT_CACHE, timeout=lock_timeout or SQLITE3_DEFAULT_LOCK_TIMEOUT)


class StatementCachingPool(SQLiteConnectionPool):
    """eventsourcing's SQLite pool, its connections opened with a statement cache."""

    #: (device, inode) of the store's file as the first connection opened it (`file_gone`).
    opened_file: tuple[int, int] | None = None

    def _create_connection(self) -> SQLiteConnection:
        try:
            conn = connect(self.db_name, self.lock_timeout)
        except (sqlite3.Error, TypeError) as e:
            raise InterfaceError(e) from e
        if not self.is_sqlite_memory_mode and not self.is_journal_mode_wal:
            (mode,) = conn.execute("PRAGMA journal_mode;").fetchone()
            if mode.lower() != "wal":
                conn.execute("PRAGMA journal_mode=WAL;")
                self.journal_mode_was_changed_to_wal = True
            self.is_journal_mode_wal = True
        conn.row_factory = sqlite3.Row
        opened = SQLiteConnection(sqlite_conn=conn, max_age=self.max_age)
        opened.file_identity = None if self.is_sqlite_memory_mode else file_identity(self.db_name)  # type: ignore[attr-defined]
        if self.opened_file is None:
            self.opened_file = opened.file_identity  # type: ignore[attr-defined]
        return opened


class StoreFileGone(StoreUnavailable, PersistenceError):
    """The store's file was deleted or replaced after a connection opened it. SQLite goes on writing to the
    file the connection holds, which no path names any more: `chronicle serve` acknowledged sessions (201) into
    a deleted store, all of them gone when it stopped. A save refuses instead, before its commit. Not an
    OperationalError: eventsourcing would retry it, and no retry brings the file back."""


def file_identity(db_name: str) -> tuple[int, int] | None:
    """(device, inode) of the file at the store's path now; None when there is none."""
    path = unquote(urlsplit(db_name).path) if db_name.startswith("file:") else db_name
    try:
        found = os.stat(path)
    except OSError:
        return None
    return found.st_dev, found.st_ino


def still_the_file(conn: Any, db_name: str) -> None:
    """Raise StoreFileGone if `conn` (a pooled connection) writes to a file that is no longer at the store's path.
    Called inside a save's transaction, after its insert took the write lock: the commit follows at once."""
    opened = getattr(conn, "file_identity", None)
    if opened is not None and file_identity(db_name) != opened:
        raise StoreFileGone(_gone(db_name, "so this save was not recorded (nor will any other be)"))


def file_gone(datastore: Any) -> StoreFileGone | None:
    """For a process that looks for work without saving (a worker's idle passes, which read the file it opened and
    so would see no new work, ever): the error its saves will raise, if the store's file is gone from its path."""
    pool = getattr(datastore, "pool", None)
    opened = getattr(pool, "opened_file", None)
    if opened is None or file_identity(pool.db_name) == opened:  # type: ignore[union-attr]
        return None
    return StoreFileGone(_gone(pool.db_name, "so nothing more can be recorded in it, nor new work seen"))  # type: ignore[union-attr]


def _gone(db_name: str, so: str) -> str:
    return (f"the store file {db_name} was deleted or replaced after this process opened it, {so}; "
            "restart the process to use the file at that path now")


def cache_statements(datastore: Any) -> None:
    """Give an eventsourcing SQLite datastore a `StatementCachingPool` in place of its pool, with
    the same settings. Called as the store is built, before any connection is opened: the pool
    replaced is closed, and holds none."""
    old = datastore.pool
    if isinstance(old, StatementCachingPool):
        return
    datastore.pool = StatementCachingPool(
        db_name=old.db_name, lock_timeout=old.lock_timeout, pool_size=old.pool_size, max_overflow=old.max_overflow,
        pool_timeout=old.pool_timeout, max_age=old.max_age, pre_ping=old.pre_ping,
    )
    old.close()
