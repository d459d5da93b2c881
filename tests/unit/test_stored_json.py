"""The JSON a projection stores is exactly what `json.dumps` with the same options writes.

`projections.sql.dumps` calls the standard library's C encoder directly (once built, no cycle
check); stored rows written before and after that change must not differ by a byte, or an
incremental read model and a rebuilt one would disagree.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from uuid import UUID

from hypothesis import given
from hypothesis import strategies as st

from chronicle.projections.sql import dumps

_scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text()
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)


def _stdlib(value: object, sort_keys: bool) -> str:
    return json.dumps(value, sort_keys=sort_keys, ensure_ascii=False, separators=(",", ":"), default=str)


@given(_values, st.booleans())
def test_the_same_text_as_the_standard_library(value, sort_keys):
    assert dumps(value, sort_keys=sort_keys) == _stdlib(value, sort_keys)


def test_what_json_cannot_hold_is_written_as_its_text_and_keys_are_sorted_only_when_asked():
    value = {"b": UUID(int=1), "a": datetime(2026, 1, 1, tzinfo=timezone.utc), "n": math.nan, "t": ("x", 1)}
    assert dumps(value) == _stdlib(value, True) == '{"a":"2026-01-01 00:00:00+00:00","b":"00000000-0000-0000-0000-000000000001",' \
        '"n":NaN,"t":["x",1]}'
    assert dumps({**value, 2: "two"}, sort_keys=False) == _stdlib({**value, 2: "two"}, False)
    assert dumps(value, sort_keys=False).startswith('{"b":"00000000-0000-0000-0000-000000000001","a":"2026-01-01 00:00:00+00:00"')
    assert dumps("\ud800 lone") == _stdlib("\ud800 lone", True)
