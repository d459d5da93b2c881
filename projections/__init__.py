"""Read models rebuilt from the event log: history, summaries, cost and audit.

Pure of the CLI and of the runtime: a projection sees events and its own tables only.
`ProjectionEngine` keeps them current; `all_projections` lists them in a fixed order.

Names are imported on first use (PEP 562): the projections import the domain's event classes,
and `session_listing` (the rows of `chronicle sessions` read over a bare connection) lives in
this package so that a listing never builds them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .audit import AuditProjection
    from .base import Projection
    from .cost import CostProjection, Pricer, no_prices
    from .engine import ProjectionEngine, ProjectionStuck, Status, UnknownProjection
    from .history import HistoryProjection
    from .summaries import SummariesProjection

_SOURCES = {
    "AuditProjection": ".audit", "Projection": ".base", "CostProjection": ".cost", "Pricer": ".cost", "no_prices": ".cost",
    "ProjectionEngine": ".engine", "ProjectionStuck": ".engine", "Status": ".engine", "UnknownProjection": ".engine",
    "HistoryProjection": ".history", "SummariesProjection": ".summaries",
}


def __getattr__(name: str) -> Any:
    if name not in _SOURCES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(_SOURCES[name], __name__), name)


def all_projections(pricer: Pricer | None = None) -> list[Projection]:
    from .audit import AuditProjection
    from .cost import CostProjection, no_prices
    from .history import HistoryProjection
    from .summaries import SummariesProjection

    return [HistoryProjection(), SummariesProjection(), CostProjection(pricer or no_prices), AuditProjection()]


__all__ = [
    "AuditProjection", "CostProjection", "HistoryProjection", "Projection", "ProjectionEngine", "Status",
    "ProjectionStuck", "SummariesProjection", "UnknownProjection", "all_projections", "no_prices",
]
