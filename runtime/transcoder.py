"""Stored states decoded by pydantic-core's JSON parser, written exactly as before.

eventsourcing's `JSONTranscoder` decodes with the standard library and an `object_hook`: a
Python call for every JSON object of every event, which made decoding the largest single cost
of reading the log (a projection rebuild, a long session's replay). This transcoder parses with
`pydantic_core.from_json` (Rust) and then turns the `{"_type_": …, "_data_": …}` objects into
their values in one walk over the containers, bottom-up as the hook did, so every event decodes
to the same value. Encoding is eventsourcing's own, untouched: the bytes a store holds, and the
hash chain over them, do not depend on which reader wrote them. Anything the fast parser refuses
(a lone surrogate escape, which the standard library accepts) is decoded the old way.

Until pydantic-core is imported by something else, a process's first `WARM_UP` states are
decoded the old way too: importing it costs ≈ 11 ms, more than the fast parser saves on a few
hundred states (≈ 1 µs each). Once it is imported (the domain's models import it, so nearly
every process that reads events has it), every store's transcoder uses it from its first state:
a store opened in a running program (the server, a library program, a fork read cold) decoded
its first thousand states the slow way for nothing.
"""

from __future__ import annotations

import sys
from typing import Any, Callable

from eventsourcing.persistence import JSONTranscoder

#: The marker the transcoder writes around a value of a registered type.
_TYPE, _DATA = "_type_", "_data_"
#: States decoded by the standard library before pydantic-core is imported and used.
WARM_UP = 1000


class FastJSONTranscoder(JSONTranscoder):
    _from_json: Callable[..., Any] | None = None
    _decoded = 0

    def decode(self, data: bytes) -> Any:
        from_json = self._from_json
        if from_json is None:
            if self._decoded < WARM_UP and "pydantic_core" not in sys.modules:
                self._decoded += 1
                return super().decode(data)
            from pydantic_core import from_json as parse

            self._from_json = from_json = parse
        try:
            value = from_json(data, cache_strings="keys")
        except ValueError:
            return super().decode(data)
        marked = data.count(b'"_type_"')
        if not marked or type(value) is not dict:
            return value if not marked else self._revive(value)
        # Most marked objects are an event's own fields (its timestamp, the ids it names): revive
        # those first, and walk the whole state only if some are nested deeper. Only values that
        # hold no container are revived here, so none is revived before what it holds.
        for key, item in value.items():
            if type(item) is dict and len(item) == 2 and _TYPE in item and _DATA in item:
                inner = item[_DATA]
                if type(inner) is not dict and type(inner) is not list:
                    value[key] = self._decode_obj(item)
                    marked -= 1
        return value if not marked else self._revive(value)

    def _revive(self, value: Any) -> Any:
        """`value` with each transcoded object turned into its value, innermost first (as the
        standard decoder's `object_hook` saw them: an object inside one is decoded before it)."""
        if type(value) is dict:
            for key, item in value.items():
                if type(item) is dict or type(item) is list:
                    value[key] = self._revive(item)
            if len(value) == 2 and _TYPE in value and _DATA in value:
                return self._decode_obj(value)
            return value
        for index, item in enumerate(value):
            if type(item) is dict or type(item) is list:
                value[index] = self._revive(item)
        return value


TRANSCODER_TOPIC = f"{FastJSONTranscoder.__module__}:{FastJSONTranscoder.__qualname__}"
