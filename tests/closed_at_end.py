"""Stores (or anything with `close()`) that a test's helpers open for the whole test, closed when the test ends by the
autouse fixture `stores_closed` (tests/conftest.py), passed or failed, on the test's own thread.

A harness holds its store for as long as the test reads through it, and the tests never closed it: each was one of
the stores tests/store_leaks.py lists (some 200 of them in a run), and one the test dropped early was finalised by
the garbage collector whenever, on whichever thread. Noted here, the store stays referenced until the test ends and
is closed then, like a `with` block around the whole test.
"""

from __future__ import annotations

from typing import Any, TypeVar

T = TypeVar("T")

_kept: list[Any] = []


def closed_at_end(thing: T) -> T:
    """`thing`, closed (its `close()` called) when the running test ends."""
    _kept.append(thing)
    return thing


def close_all() -> None:
    """Close, newest first, what the test noted (each once, whatever the others raise)."""
    errors: list[BaseException] = []
    while _kept:
        try:
            _kept.pop().close()
        except Exception as exc:  # noqa: BLE001 - the others are closed all the same
            errors.append(exc)
    if errors:
        raise errors[0]
