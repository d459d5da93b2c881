"""A turn left in flight because the store's disk is full says to free space before the resume it suggests: a
resume at once fails again the same way (seen on a full filesystem: `lost the event store (OperationalError:
database or disk is full)`, then the same after `resume`). Other losses keep the plain advice."""

from __future__ import annotations

import sqlite3
import uuid

import pytest

from chronicle.runtime.turn_outcome import left_in_flight


def _sqlite_full() -> sqlite3.OperationalError:
    """SQLite's own SQLITE_FULL, from a database allowed one page more than it has."""
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE TABLE t (x BLOB)")
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages + 1}")
    with pytest.raises(sqlite3.OperationalError) as full:
        conn.execute("INSERT INTO t VALUES (?)", (b"x" * 100_000,))
    return full.value


def test_a_full_disk_says_to_free_space_before_the_resume():
    sid = uuid.uuid4()
    outcome = left_in_flight(sid, None, _sqlite_full(), "sqlite:////srv/agents/chronicle.db")
    assert outcome.status == "interrupted"
    assert outcome.reason is not None and outcome.reason.startswith("lost the event store (OperationalError: database or disk is full)")
    assert "the disk holding the store is full: free some space, then `chronicle --db" in outcome.reason
    assert outcome.reason.endswith(f"resume {sid}` continues it")


@pytest.mark.parametrize("message", ["disk I/O error", "server closed the connection unexpectedly"])
def test_another_loss_keeps_the_plain_advice(message):
    outcome = left_in_flight(uuid.uuid4(), None, sqlite3.OperationalError(message), None)
    assert outcome.reason is not None and "free some space" not in outcome.reason and "` continues it" in outcome.reason
