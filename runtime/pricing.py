"""Money from raw usage: a small dated price table (USD per million tokens).

Events hold raw usage only; cost is computed from this table when it is needed, so a price
change is a re-computation, never a rewrite of history. Unknown models price as None: a
caller decides what an unknown cost means (the cost guard counts it as zero and says so).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from chronicle.domain.content import Usage


@dataclass(frozen=True)
class Rate:
    """USD per million tokens, valid from ``since`` (inclusive)."""

    prefix: str
    since: date
    input: float
    output: float
    cache_write: float
    cache_read: float


# Longest matching prefix wins; among its rows, the newest ``since`` not after ``at``.
RATES: tuple[Rate, ...] = (
    Rate("claude-opus-4-5", date(2025, 11, 24), 5.0, 25.0, 6.25, 0.50),
    Rate("claude-opus-4-1", date(2025, 8, 5), 15.0, 75.0, 18.75, 1.50),
    Rate("claude-opus-4", date(2025, 5, 22), 15.0, 75.0, 18.75, 1.50),
    Rate("claude-sonnet-4-5", date(2025, 9, 29), 3.0, 15.0, 3.75, 0.30),
    Rate("claude-sonnet-4", date(2025, 5, 22), 3.0, 15.0, 3.75, 0.30),
    Rate("claude-3-7-sonnet", date(2025, 2, 24), 3.0, 15.0, 3.75, 0.30),
    Rate("claude-haiku-4-5", date(2025, 10, 15), 1.0, 5.0, 1.25, 0.10),
    Rate("claude-3-5-haiku", date(2024, 10, 22), 0.80, 4.0, 1.0, 0.08),
)


def rate_for(model: str, at: datetime | None = None) -> Rate | None:
    day = at.date() if at else date.max
    matches = [r for r in RATES if model.startswith(r.prefix)]
    if not matches:
        return None
    longest = max(len(r.prefix) for r in matches)
    dated = [r for r in matches if len(r.prefix) == longest and r.since <= day]
    candidates = dated or [r for r in matches if len(r.prefix) == longest]
    return max(candidates, key=lambda r: r.since)


def price(model: str, usage: Usage | dict[str, Any], at: datetime | None = None) -> float | None:
    """USD for one call's usage, or None when the model is not in the table."""
    rate = rate_for(model or "", at)
    if rate is None:
        return None
    u = usage if isinstance(usage, Usage) else Usage.model_validate(usage or {})
    return (
        u.input_tokens * rate.input
        + u.output_tokens * rate.output
        + u.cache_creation_input_tokens * rate.cache_write
        + u.cache_read_input_tokens * rate.cache_read
    ) / 1_000_000
