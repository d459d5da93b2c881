"""The projections of one store, priced with our price table, caught up on demand.

Read commands call `caught_up(store)` before answering, so what they show includes every
event committed before they started, however the projections are otherwise kept current.
"""

from __future__ import annotations

import logging

from chronicle.projections import ProjectionEngine, ProjectionStuck, all_projections

from .pasteable import pasteable
from .pricing import price
from .store import ChronicleStore

log = logging.getLogger("chronicle")


class ReadModelsMissing(LookupError):
    """A read-only store whose projections were never built: they cannot be built now."""


def projection_engine(store: ChronicleStore, announce: bool = True) -> ProjectionEngine:
    """The store's engine (made once per store); `announce`: ProjectionEngine's, when it is made."""
    engine = getattr(store, "_projection_engine", None)
    if engine is None:
        engine = ProjectionEngine(store, all_projections(pricer=price), ensure=not getattr(store, "read_only", False),
                                  announce=announce)
        store._projection_engine = engine  # type: ignore[attr-defined]
    return engine


def caught_up(store: ChronicleStore) -> ProjectionEngine:
    engine = projection_engine(store)
    if getattr(store, "read_only", False):
        try:
            behind = max((engine.head() - engine.position(name) for name in engine.projections), default=0)
        except Exception as exc:  # noqa: BLE001 - no tracking table: they were never built in this store
            raise ReadModelsMissing(
                "the store is read-only and its read models (titles, cost, audit) were never built in it; "
                "`log` and `history` work, or copy the store somewhere writable and run this there"
            ) from exc
        if behind > 0:
            log.warning("the store is read-only, so its read models cannot catch up: they are %d event(s) behind the log "
                        "(sessions, cost and audit may miss the newest); log and history read the events themselves", behind)
        return engine
    known = set(engine.unreadable)
    try:
        engine.catch_up()
    except ProjectionStuck as exc:
        from .app.errors import AppError

        raise AppError(exc.said(pasteable(f"projections rebuild {exc.name}", store.url)), 1) from exc
    for position in sorted(set(engine.unreadable) - known):
        log.warning("event at position %d cannot be decoded (%s); the read models passed over it. "
                    "`%s` lists every such event", position, engine.unreadable[position], pasteable("doctor", store.url))
    return engine


def caught_up_or_none(store: ChronicleStore) -> ProjectionEngine | None:
    """`caught_up`, or None with a warning when the read models cannot be written now: the disk holding the store is
    full or the database refuses writes (a writable store, so `caught_up` would try). Catching up writes their
    tables, so `sessions`, `why` and the past in `history` failed while `log` read on; their callers read the
    events instead (without cost figures), as for a read-only store whose read models were never built."""
    from .store_errors import is_disk_full, is_read_only_error

    try:
        return caught_up(store)
    except ReadModelsMissing:
        raise
    except Exception as exc:
        if not (is_disk_full(exc) or is_read_only_error(exc)):
            raise
        log.warning("the read models cannot catch up (%s): read from the events instead, without cost figures; "
                    "free some space for them to catch up", str(exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return None

