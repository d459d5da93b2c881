"""runtime/jsonable.py converts event data as pydantic-core's `to_jsonable_python` does (what
`log --json` printed before it), for the values events hold and for anything it hands over."""

from __future__ import annotations

from datetime import timedelta, timezone
from decimal import Decimal
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic_core import to_jsonable_python

from chronicle.runtime.jsonable import jsonable
from tests.helpers import same_value

ZONES = st.sampled_from([timezone.utc, timezone(timedelta(hours=5, minutes=30)), timezone(timedelta(hours=-8))])
SCALARS = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True, allow_infinity=True) | st.text() | st.uuids()
    | st.datetimes(timezones=ZONES) | st.datetimes()  # naive ones are handed over
    | st.decimals(allow_nan=False, places=2) | st.dates() | st.binary(max_size=4)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.lists(inner, max_size=3).map(tuple)
    | st.dictionaries(st.text(max_size=5), inner, max_size=4) | st.dictionaries(st.integers(), inner, max_size=2),
    max_leaves=12,
)


def _outcome(convert: Any, value: Any) -> Any:
    try:
        return convert(value)
    except Exception as exc:  # noqa: BLE001 - a refusal must be the same refusal
        return type(exc)


@settings(max_examples=400, deadline=None)
@given(VALUES)
def test_converts_as_pydantic_core_does(value: Any) -> None:
    assert same_value(_outcome(jsonable, value), _outcome(to_jsonable_python, value))


def test_the_usual_values_are_converted_here():
    from datetime import datetime
    from uuid import UUID

    at = datetime(2026, 11, 26, 12, 0, 0, 5000, tzinfo=timezone.utc)
    assert jsonable({"at": at, "ids": (UUID(int=1),), "n": Decimal("1.5")}) == {
        "at": "2026-11-26T12:00:00.005000Z", "ids": ["00000000-0000-0000-0000-000000000001"], "n": "1.5",
    }
