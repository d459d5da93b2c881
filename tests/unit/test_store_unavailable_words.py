"""A store that cannot be reached once the retries are spent is "the store is unavailable" (exit 1, ChronicleError
code 1, HTTP 503), never an internal error with a request for a bug report; a store error that is a bug is not
dressed up as an outage. Seen: `chronicle chat` left open while PostgreSQL stopped answered the next input with
`internal error: OperationalError: couldn't get a connection after 1.00 sec`."""

from __future__ import annotations

import sqlite3

import pytest
from eventsourcing.persistence import IntegrityError, InterfaceError, OperationalError, ProgrammingError

from chronicle.runtime.app.errors import UNAVAILABLE, known_failure
from chronicle.runtime.store_errors import is_connection_lost


@pytest.mark.parametrize("exc", [
    OperationalError("couldn't get a connection after 5.00 sec"),
    OperationalError('connection to server at "127.0.0.1", port 5432 failed: Connection refused'),
    OperationalError("server closed the connection unexpectedly\n\tThis probably means the server terminated abnormally"),
    OperationalError("terminating connection due to administrator command"),
    OperationalError("FATAL:  the database system is shutting down"),
    InterfaceError("the connection is lost"),
])
def test_a_lost_or_unreachable_server_is_the_store_unavailable(exc):
    assert is_connection_lost(exc)
    known = known_failure(exc)
    assert known is not None and known.code == 1 and known.kind == UNAVAILABLE
    assert str(known).startswith(f"the store is unavailable: {str(exc).splitlines()[0]}; check that the database server")
    assert "\n" not in str(known)


@pytest.mark.parametrize("exc", [
    OperationalError('near "SELEC": syntax error'),  # SQLite says a bad statement with this class: a bug
    OperationalError("no such table: stored_events"),
    ProgrammingError("column x does not exist"),
    IntegrityError("duplicate key value violates unique constraint"),
    ValueError("couldn't get a connection"),  # the words alone, not from the store
])
def test_other_store_errors_are_not_called_an_outage(exc):
    assert not is_connection_lost(exc)
    known = known_failure(exc)
    assert known is None or known.kind != UNAVAILABLE


def test_a_write_lock_held_past_the_busy_timeout_is_unavailable_but_not_a_lost_server():
    """Another process holding SQLite's write lock past CHRONICLE_SQLITE_BUSY_TIMEOUT: the store cannot be written now
    (the documented "the store is unavailable" line, naming the lock), though no connection was lost."""
    exc = sqlite3.OperationalError("database is locked")
    assert not is_connection_lost(exc)
    known = known_failure(exc)
    assert known is not None and known.kind == UNAVAILABLE and "holds the write lock" in str(known)
