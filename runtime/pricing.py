"""USD for recorded token usage, from a dated price table (runtime/data/prices.json).

Events hold raw usage only; money is computed by the cost projection with `price`, at the
date of each call, so changing this table and rebuilding the projection re-prices history.
A model the table does not know has no price (None), never a guessed one.

Stopgap written by the projections issue so cost could be built; the provider issue owns the
real table (same signature).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import date
from functools import lru_cache
from importlib import resources
from typing import Any, Mapping

PER_TOKEN = 1_000_000


@dataclass(frozen=True)
class Rate:
    prefix: str
    since: date
    input: float
    output: float
    cache_write: float
    cache_read: float


@lru_cache(maxsize=1)
def rates() -> tuple[Rate, ...]:
    raw = json.loads(resources.files("chronicle.runtime").joinpath("data/prices.json").read_text(encoding="utf-8"))
    return tuple(
        Rate(p["prefix"], date.fromisoformat(p["since"]), p["input"], p["output"], p["cache_write"], p["cache_read"])
        for p in raw["prices"]
    )


def rate_for(model: str, at: date) -> Rate | None:
    """The newest rate in force at `at` for the longest prefix matching `model`."""
    matching = [r for r in rates() if model.startswith(r.prefix) and r.since <= at]
    if not matching:
        return None
    return max(matching, key=lambda r: (len(r.prefix), r.since))


def _tokens(usage: Any, kind: str) -> int:
    value = usage.get(kind) if isinstance(usage, Mapping) else getattr(usage, kind, 0)
    return int(value or 0)


def price(model: str, usage: Any, at: date | None = None) -> float | None:
    """USD for one call's usage (a Usage or a dict of token counts) at date `at` (today if None)."""
    rate = rate_for(model or "", at or date.today())
    if rate is None:
        return None
    return (
        _tokens(usage, "input_tokens") * rate.input
        + _tokens(usage, "output_tokens") * rate.output
        + _tokens(usage, "cache_creation_input_tokens") * rate.cache_write
        + _tokens(usage, "cache_read_input_tokens") * rate.cache_read
    ) / PER_TOKEN
