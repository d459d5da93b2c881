"""Read models rebuilt from the event log: history, summaries, cost and audit.

Pure of the CLI and of the runtime: a projection sees events and its own tables only.
`ProjectionEngine` keeps them current; `all_projections` lists them in a fixed order.
"""

from __future__ import annotations

from .audit import AuditProjection
from .base import Projection
from .cost import CostProjection, Pricer, no_prices
from .engine import ProjectionEngine, Status, UnknownProjection
from .history import HistoryProjection
from .summaries import SummariesProjection


def all_projections(pricer: Pricer = no_prices) -> list[Projection]:
    return [HistoryProjection(), SummariesProjection(), CostProjection(pricer), AuditProjection()]


__all__ = [
    "AuditProjection", "CostProjection", "HistoryProjection", "Projection", "ProjectionEngine", "Status",
    "SummariesProjection", "UnknownProjection", "all_projections", "no_prices",
]
