"""A copy of a cached aggregate for a command to change, without `copy.deepcopy`'s cost.

eventsourcing hands out a deep copy of a cached aggregate so a command's changes never reach
the cache before they are saved. `copy.deepcopy` reduces and rebuilds every object, UUIDs and
datetimes included: a session of 1,000 turns holds ~3,000 UUIDs (its turn ids, its head, its
compaction), and its copy took ≈ 40 ms, six times per turn in the loop. Values that cannot change
are shared instead of rebuilt: strings, numbers, UUIDs, datetimes, enums, frozen pydantic models
(the domain's content blocks and specs) and tuples of those. Lists, dicts and sets are copied,
and anything else goes to `copy.deepcopy`, so the result is as independent as before. Containers
reached twice are copied once (the memo), as deepcopy does.
"""

from __future__ import annotations

import copy
import sys
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID

ATOMIC = (str, int, float, bool, bytes, type(None), UUID, datetime, date, time, timedelta, Decimal, Enum, range, type)


def copy_aggregate(aggregate: Any) -> Any:
    """A copy that shares only immutable values with `aggregate` (a fresh `__dict__`, same class)."""
    memo: dict[int, Any] = {}
    clone = object.__new__(type(aggregate))
    memo[id(aggregate)] = clone
    clone.__dict__.update({key: _copy(value, memo) for key, value in aggregate.__dict__.items()})
    return clone


def _copy(value: Any, memo: dict[int, Any]) -> Any:
    if isinstance(value, ATOMIC) or _frozen_model(value):
        return value
    kind = type(value)
    if kind is tuple or kind is frozenset:
        items = [_copy(item, memo) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else kind(items)
    known = memo.get(id(value))
    if known is not None:
        return known
    if kind is list:
        out: Any = []
        memo[id(value)] = out
        out.extend(_copy(item, memo) for item in value)
        return out
    if kind is dict:
        out = {}
        memo[id(value)] = out
        for key, item in value.items():
            out[key] = _copy(item, memo)
        return out
    if kind is set:
        out = set()
        memo[id(value)] = out
        out.update(_copy(item, memo) for item in value)
        return out
    return copy.deepcopy(value, memo)


def _frozen_model(value: Any) -> bool:
    # No value is a pydantic model before pydantic is imported, and a command that replays
    # aggregates without validating anything (log) should not import it just to ask.
    main = sys.modules.get("pydantic.main")
    return main is not None and isinstance(value, main.BaseModel) and bool(type(value).model_config.get("frozen"))
