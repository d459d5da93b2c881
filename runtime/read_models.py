"""The projections of one store, priced with our price table, caught up on demand.

Read commands call `caught_up(store)` before answering, so what they show includes every
event committed before they started, however the projections are otherwise kept current.
"""

from __future__ import annotations

import logging

from chronicle.projections import ProjectionEngine, all_projections

from .pricing import price
from .store import ChronicleStore

log = logging.getLogger("chronicle")


def projection_engine(store: ChronicleStore) -> ProjectionEngine:
    engine = getattr(store, "_projection_engine", None)
    if engine is None:
        engine = ProjectionEngine(store, all_projections(pricer=price))
        store._projection_engine = engine  # type: ignore[attr-defined]
    return engine


def caught_up(store: ChronicleStore) -> ProjectionEngine:
    engine = projection_engine(store)
    known = set(engine.unreadable)
    engine.catch_up()
    for position in sorted(set(engine.unreadable) - known):
        log.warning("event at position %d cannot be decoded (%s); the read models passed over it. "
                    "`chronicle doctor` lists every such event", position, engine.unreadable[position])
    return engine
