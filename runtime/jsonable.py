"""Event data as JSON-able Python values, without importing pydantic-core for the usual ones.

`log` turns each event's fields into JSON values for its table and `--json`; pydantic-core's
`to_jsonable_python` did it, and importing pydantic-core is ≈ 11 ms of a command that otherwise
needs none of it (runtime/transcoder.py decodes a short log without it). The values events hold
(text, numbers, ids, aware times, lists and objects of them) are converted here exactly as
pydantic-core converts them; anything else is handed to it. tests/unit/test_jsonable.py checks
the two agree.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

_AS_IS = (str, int, bool, float, type(None))


def jsonable(value: Any) -> Any:
    kind = type(value)
    if kind in _AS_IS:
        return value
    if kind is dict:
        out = {}
        for key, item in value.items():
            if type(key) is not str:
                return _pydantic(value)
            out[key] = jsonable(item)
        return out
    if kind is list or kind is tuple:
        return [jsonable(item) for item in value]
    if kind is UUID:
        return str(value)
    if kind is datetime and value.tzinfo is not None:
        text = value.isoformat()
        return text[:-6] + "Z" if text.endswith("+00:00") else text
    return _pydantic(value)


def _pydantic(value: Any) -> Any:
    from pydantic_core import to_jsonable_python

    return to_jsonable_python(value)
