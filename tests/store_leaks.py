"""Which test leaves a store open: every eventsourcing datastore (the pool under a ChronicleStore,
whoever opened it) is noted when it opens and when it closes; what a test left open is closed at its
end and named with where it was opened (tests/conftest.py's `stores_closed` fails the test, or lists
it, as CHRONICLE_STORE_LEAKS says; `open_now` lets a test assert it left none).

Why: a store left to the collector is finalised whenever the collector gets to it, in whichever
test runs then, and on whichever thread: a fresh-clone CI run once showed eventsourcing's
`PostgresDatastore.__del__` failing to join its pool's thread from that very thread, a warning
attributed to an unrelated test. The datastore is watched rather than ChronicleStore, so that a
store whose own constructor failed after its pool opened (a wrong cipher key) is seen too.
"""

from __future__ import annotations

import os
import threading
import traceback
import weakref
from dataclasses import dataclass, field
from typing import Any

#: Frames of these files are not where a store was opened: the opener is the first frame past them.
_PLUMBING = ("/eventsourcing/", "/runtime/store.py", "/runtime/store_open.py", "/projections/sql.py", "/tests/store_leaks.py",
             "/site-packages/", "/lib/python3", "<frozen")


@dataclass
class Opened:
    """One datastore: where it was opened (a few of our frames) and whether it was closed."""

    kind: str
    where: str
    closed: bool = False
    collected_open: bool = False


@dataclass
class Watch:
    """The datastores opened while one test ran."""

    opened: list[tuple[Any, Opened]] = field(default_factory=list)  # (weakref to the datastore, its record)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def open_ones(self) -> list[tuple[Any, Opened]]:
        with self.lock:
            found = []
            for ref, record in self.opened:
                datastore = ref()
                if record.collected_open or (datastore is not None and not record.closed):
                    found.append((datastore, record))
            return found


_current: Watch | None = None
_records: "weakref.WeakKeyDictionary[Any, Opened]" = weakref.WeakKeyDictionary()
_installed = False


def _opener() -> str:
    frames = [f for f in traceback.extract_stack()[:-3] if not any(p in f.filename for p in _PLUMBING)]
    return " <- ".join(f"{os.path.relpath(f.filename)}:{f.lineno} {f.name}" for f in reversed(frames[-6:])) or "?"


def _wrap(cls: type, kind: str) -> None:
    original_init, original_close, original_del = cls.__init__, cls.close, cls.__del__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original_init(self, *args, **kwargs)
        watch = _current
        if watch is None:  # opened outside any test's run (a module or session fixture): not a test's leak
            return
        record = Opened(kind, _opener())
        _records[self] = record
        with watch.lock:
            watch.opened.append((weakref.ref(self), record))

    def close(self: Any) -> None:
        record = _records.get(self)
        if record is not None:
            record.closed = True
        original_close(self)

    def __del__(self: Any) -> None:
        record = _records.get(self)
        if record is not None and not record.closed:
            record.collected_open = True  # the collector got to it first: what the CI warning was
        original_del(self)

    cls.__init__, cls.close, cls.__del__ = __init__, close, __del__  # type: ignore[method-assign]


def _wrap_application() -> None:
    """An Application's own __del__ closes its datastore: that close is the collector's, not the program's."""
    from eventsourcing.application import Application

    original_del = Application.__del__

    def __del__(self: Any) -> None:
        closing = getattr(self, "closing", None)
        datastore = getattr(getattr(self, "factory", None), "datastore", None)
        record = _records.get(datastore) if datastore is not None else None
        if record is not None and not record.closed and closing is not None and not closing.is_set():
            record.collected_open = True
        original_del(self)

    Application.__del__ = __del__  # type: ignore[method-assign]


def install() -> None:
    """Watch eventsourcing's PostgreSQL and SQLite datastores (once per process)."""
    global _installed
    if _installed:
        return
    from eventsourcing.postgres import PostgresDatastore
    from eventsourcing.sqlite import SQLiteDatastore

    _wrap(PostgresDatastore, "PostgreSQL")
    _wrap(SQLiteDatastore, "SQLite")
    _wrap_application()
    _installed = True


def start() -> Watch:
    global _current
    install()
    _current = Watch()
    return _current


def open_now() -> list[str]:
    """The stores the running test opened and has not closed, so far (a test may assert there are none)."""
    watch = _current
    return [] if watch is None else [f"a {r.kind} store opened at {r.where}" for _, r in watch.open_ones()]


def stop(watch: Watch) -> list[str]:
    """What the test left open, one line each; those still alive are closed now, so the next test starts clean."""
    global _current
    _current = None
    left = []
    for datastore, record in watch.open_ones():
        how = "collected by the garbage collector unclosed" if record.collected_open else "still open"
        left.append(f"a {record.kind} store {how}, opened at {record.where}")
        if datastore is not None and not record.closed:
            datastore.close()
    return left
