"""Telling a write refused by a read-only database from other failures, by the driver's words.

Apart from store.py (which re-exports it) because every command's error handler asks it, and
importing the store imports the domain: `sessions` answered from the read models never needs it.
"""

from __future__ import annotations


def is_read_only_error(exc: BaseException) -> bool:
    """A write refused because the database (its file, directory or mount) is read-only."""
    text = str(exc).lower()
    return any(sign in text for sign in ("readonly database", "read-only file system", "read only transaction",
                                         "read-only transaction"))
