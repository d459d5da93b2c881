"""How a running loop learns that its session's steering or cancel may have changed, without
reading the session at every safe point (`runtime/controls.py` reads it when a probe says so).

On SQLite the session's newest version is one indexed lookup in the file, with nothing to
commit (`VersionProbe`). On PostgreSQL a turn's first few questions are the same lookup, then a
LISTEN connection shared by the store's running turns answers them with no query at all
(`NotifyProbe`, `WarmingProbe`): steer and cancel NOTIFY (`notify_control`), saves made in this
process count as changes (`saved_here`), and a full read every few seconds covers writers that
do not notify. Reading the session at every safe point cost about three transactions per LLM
step on PostgreSQL.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any, Callable, Protocol
from uuid import UUID

from chronicle.domain.session import Session

from .store import ChronicleStore

#: On PostgreSQL, a full read at least this often, for writers that do not NOTIFY.
FALLBACK_S = 2.0
CHANNEL = "chronicle_control"

#: Saves of each session made in this process (by any store object): counted as they commit.
_LOCAL_SAVES: Counter[UUID] = Counter()


def saved_here(session_ids: Any) -> None:
    """Called by the store after every save in this process, with the ids it wrote."""
    _LOCAL_SAVES.update(session_ids)


class ControlProbe(Protocol):
    """Whether a session's control requests may have changed since `mark()`; False must mean
    nothing was recorded. The port through which a loop learns of steering and cancel."""

    def changed(self) -> bool: ...

    def mark(self) -> None: ...

    def read(self, load: Callable[[], Session]) -> Session:
        """The session as `load()` reads it, marked so that any write after that read is a change."""
        ...

    def close(self) -> None: ...


class VersionProbe:
    """The session's newest stored version against the one last read (SQLite: a lookup in
    the file, nothing to commit). Exact and immediate, for any writer."""

    def __init__(self, store: ChronicleStore, session_id: UUID) -> None:
        self.store, self.session_id, self.seen = store, session_id, -1

    def _latest(self) -> int:
        return self.store.latest_version(self.session_id)

    def changed(self) -> bool:
        return self._latest() != self.seen

    def mark(self) -> None:
        self.seen = self._latest()

    def read(self, load: Callable[[], Session]) -> Session:
        """The version read is the mark: no lookup for it (one round trip fewer per read on PostgreSQL)."""
        session = load()
        self.seen = session.version
        return session

    def close(self) -> None:
        pass


class Listener:
    """One LISTEN connection per store, shared by the NotifyProbes of its running turns.

    A connection per running turn meant a new PostgreSQL connection (a server process, its
    start-up and authentication) for every turn a worker ran. Notifications are counted per
    session the probes asked about; the connection closes when the last probe does, so none
    outlives the turns that use it.

    The connection can be lost under a running turn (pg_terminate_backend, a failover, an idle
    reaper): the probes then look the session's version up (`count` answers None) and the
    connection is opened again lazily, RECONNECT_S after the loss and doubling, RECONNECTS times
    in a row at most. A lost listener failed the turn for good: psycopg's own error is not one of
    the store's, so the loop took it for a bug. What was notified while it was down is lost, so a
    reconnection counts as a notification for every session (each probe reads its session again)."""

    def __init__(self, store: ChronicleStore) -> None:
        from .pg_options import login

        self.login = login(store.url)
        self.conn: Any = self._connect()
        self.counts: dict[str, int] = {}
        self.users = 0
        self.lock = threading.Lock()
        #: Lost connections in a row, and when the next one may be opened (while `conn` is None).
        self.failures = 0
        self.retry_at = 0.0

    def _connect(self) -> Any:
        from .pg_options import connect

        conn = connect(self.login, autocommit=True)
        try:
            conn.execute(f"LISTEN {CHANNEL}")
        except BaseException:
            conn.close()
            raise
        return conn

    @classmethod
    def join(cls, store: ChronicleStore, session_id: UUID) -> "Listener":
        with _LISTENERS_LOCK:
            listener: Listener | None = store.__dict__.get("_control_listener")
            if listener is None:
                listener = store.__dict__["_control_listener"] = cls(store)
            listener.users += 1
            listener.counts.setdefault(session_id.hex, 0)
            return listener

    def count(self, session_id: UUID, wait_s: float = 0.0) -> int | None:
        """Notifications naming the session since it joined (draining what has arrived); with
        `wait_s`, blocking up to that long for the next one when none has arrived yet. None while
        the connection is lost: the caller must look for changes another way."""
        import psycopg

        with self.lock:
            if self.conn is None and not self._reconnect():
                return None
            try:
                for note in self.conn.notifies(timeout=0):
                    if note.payload in self.counts:
                        self.counts[note.payload] += 1
                if wait_s > 0:
                    for note in self.conn.notifies(timeout=wait_s, stop_after=1):
                        if note.payload in self.counts:
                            self.counts[note.payload] += 1
            except (psycopg.OperationalError, psycopg.InterfaceError):
                self._lost()
                return None
            return self.counts[session_id.hex]

    def _lost(self) -> None:
        try:
            self.conn.close()
        except Exception:  # noqa: BLE001 - it is already gone
            pass
        self.conn = None
        self.failures += 1
        self.retry_at = time.monotonic() + min(RECONNECT_MAX_S, RECONNECT_S * 2 ** (self.failures - 1))

    def _reconnect(self) -> bool:
        """Open the connection again if its time has come (never more than RECONNECTS times in a row)."""
        if self.failures > RECONNECTS or time.monotonic() < self.retry_at:
            return False
        try:
            self.conn = self._connect()
        except Exception:  # noqa: BLE001 - still unreachable: the version lookups go on
            self.conn = None
            self.failures += 1
            self.retry_at = time.monotonic() + min(RECONNECT_MAX_S, RECONNECT_S * 2 ** (self.failures - 1))
            return False
        self.failures = 0
        for key in self.counts:  # whatever was notified meanwhile went unheard: every probe reads again
            self.counts[key] += 1
        return True

    def close(self) -> None:
        with self.lock:
            if self.conn is not None:
                self.conn.close()
                self.conn = None

    def leave(self, store: ChronicleStore) -> None:
        with _LISTENERS_LOCK:
            self.users -= 1
            if self.users <= 0:
                store.__dict__.pop("_control_listener", None)
                self.close()


#: A lost LISTEN connection is opened again this long after the loss, doubling up to RECONNECT_MAX_S, at
#: most RECONNECTS times in a row; the probes look versions up meanwhile (and for good after that).
RECONNECT_S = 0.5
RECONNECT_MAX_S = 8.0
RECONNECTS = 8


_LISTENERS_LOCK = threading.Lock()


class NotifyProbe:
    """PostgreSQL: notifications on CHANNEL naming the session (through the store's shared
    Listener), saves of it in this process, or a full read every FALLBACK_S. No query while
    nothing happens. While the listener's connection is lost, the session's newest version
    against the one last read answers instead, as VersionProbe does."""

    def __init__(self, store: ChronicleStore, session_id: UUID, fallback_s: float = FALLBACK_S) -> None:
        self.store, self.session_id, self.fallback_s = store, session_id, fallback_s
        self.listener: Listener | None = Listener.join(store, session_id)
        self.heard = self.listener.count(session_id) or 0
        self.local = -1
        self.read_at = 0.0
        self.notified = False
        #: The version the last read found (None: not read since the mark), for when the listener is lost.
        self.version: int | None = None

    def _heard(self) -> int | None:
        return self.listener.count(self.session_id) if self.listener is not None else None

    def changed(self) -> bool:
        heard = self._heard()
        if heard is None:
            return self.notified or self.version is None or self.store.latest_version(self.session_id) != self.version
        if heard != self.heard:
            self.notified = True
        return self.notified or _LOCAL_SAVES[self.session_id] != self.local or time.monotonic() - self.read_at > self.fallback_s

    def mark(self) -> None:
        heard = self._heard()  # drains what arrived so far: the read that follows sees those writes
        if heard is not None:  # while lost, the count is left behind: the reconnection moves it on
            self.heard = heard
        self.notified, self.local, self.read_at, self.version = False, _LOCAL_SAVES[self.session_id], time.monotonic(), None

    def read(self, load: Callable[[], Session]) -> Session:
        self.mark()  # before the read: a write racing it shows as a change next time
        session = load()
        self.version = session.version
        return session

    def close(self) -> None:
        if self.listener is not None:
            self.listener.leave(self.store)
            self.listener = None


def probe_for(store: ChronicleStore, session_id: UUID) -> ControlProbe:
    if store.backend == "postgresql":
        try:
            return NotifyProbe(store, session_id)
        except Exception:  # noqa: BLE001 - no listener (connection limit): the exact lookup still works
            pass
    return VersionProbe(store, session_id)


#: Safe points (and cancel polls) a PostgreSQL turn answers with version lookups before it joins the listener.
LOOKUPS = 8


class WarmingProbe:
    """PostgreSQL: the exact version lookup for a turn's first LOOKUPS questions, the store's shared
    listener (`probe_for`) after that.

    Joining the listener opens a connection when no other turn of the store holds it: a server
    process and its authentication, ≈ 10 ms of a short turn's wall (most of a forked session's
    first one-step turn), against a fraction of a millisecond per lookup. A short turn never
    needs it; a long one pays LOOKUPS lookups (a few hundredths of a transaction per step over a
    50-step turn) and then asks nothing while nothing happens, as before. The switch answers
    "changed" once, so the read that follows starts after LISTEN is in place: a write committed
    before it is in that read, one after it is notified."""

    def __init__(self, store: ChronicleStore, session_id: UUID, lookups: int = LOOKUPS) -> None:
        self.store, self.session_id, self.left = store, session_id, lookups
        self.lookup = VersionProbe(store, session_id)
        self.steady: ControlProbe | None = None

    def changed(self) -> bool:
        if self.steady is not None:
            return self.steady.changed()
        if self.left <= 0:
            self.steady = probe_for(self.store, self.session_id)
            return True
        self.left -= 1
        return self.lookup.changed()

    def mark(self) -> None:
        (self.steady or self.lookup).mark()

    def read(self, load: Callable[[], Session]) -> Session:
        return (self.steady or self.lookup).read(load)

    def close(self) -> None:
        if self.steady is not None:
            self.steady.close()


def turn_probe(store: ChronicleStore, session_id: UUID) -> ControlProbe:
    """The probe a running turn's controls use: lookups first on PostgreSQL (WarmingProbe), lookups only on SQLite."""
    return WarmingProbe(store, session_id) if store.backend == "postgresql" else VersionProbe(store, session_id)


def notify_control(store: ChronicleStore, session_id: UUID) -> None:
    """Tell running loops (any process) that this session's steering or cancel changed."""
    if store.backend != "postgresql":
        return  # SQLite loops look up the session's version
    with store.recorder.datastore.transaction(commit=True) as cursor:  # type: ignore[attr-defined]
        cursor.execute("SELECT pg_notify(%s, %s)", (CHANNEL, session_id.hex))
