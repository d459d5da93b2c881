"""The fast transcoder must decode every stored state to exactly what eventsourcing's own
`JSONTranscoder` decodes it to, and write the same bytes: old rows, the hash chain and other
readers depend on both."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID

from eventsourcing.persistence import DatetimeAsISO, DecimalAsStr, JSONTranscoder, UUIDAsHex
from hypothesis import given, settings
from hypothesis import strategies as st

from chronicle.runtime.transcoder import WARM_UP, FastJSONTranscoder
from tests.helpers import same_value


def _registered(transcoder: JSONTranscoder) -> JSONTranscoder:
    for transcoding in (UUIDAsHex(), DecimalAsStr(), DatetimeAsISO()):
        transcoder.register(transcoding)
    return transcoder


OLD, NEW = _registered(JSONTranscoder()), _registered(FastJSONTranscoder())
NEW._decoded = WARM_UP  # past its warm-up: these tests are of pydantic-core's path

SCALARS = (
    st.none() | st.booleans() | st.integers() | st.integers(min_value=2**63, max_value=2**90)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text() | st.uuids()
    | st.datetimes(timezones=st.just(timezone.utc)) | st.decimals(allow_nan=False, places=3)
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    | st.fixed_dictionaries({"_type_": st.just("uuid_hex"), "_data_": st.uuids().map(lambda u: u.hex)}),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=8), VALUES, max_size=6))
def test_decodes_every_state_as_the_standard_transcoder_does(state: dict[str, Any]) -> None:
    data = OLD.encode(state)
    assert NEW.encode(state) == data
    assert same_value(NEW.decode(data), OLD.decode(data))


def test_an_event_state_revives_its_ids_and_times_at_any_depth() -> None:
    sid, when = UUID(int=7), datetime(2026, 1, 1, tzinfo=timezone(timedelta(hours=2)))
    state = {"timestamp": when, "session_id": sid, "head": [sid, sid], "nested": {"at": [{"when": when}]},
             "amount": Decimal("1.50"), "plain": {"_type_": "x"}}
    decoded = NEW.decode(OLD.encode(state))
    assert decoded == state and type(decoded["head"][1]) is UUID and decoded["nested"]["at"][0]["when"].utcoffset()


def test_what_the_fast_parser_refuses_is_read_the_old_way() -> None:
    lone_surrogate = b'{"text":"\\ud800 and more","n":1}'
    assert NEW.decode(lone_surrogate) == json.loads(lone_surrogate) == {"text": "\ud800 and more", "n": 1}
    too_big = b'{"x":1e400}'
    assert NEW.decode(too_big) == OLD.decode(too_big)


def in_a_fresh_process(*lines: str) -> list[str]:
    """What `lines` print, run in a new interpreter: whether pydantic-core is imported is per process."""
    import subprocess
    import sys

    probe = "\n".join([
        "from tests.unit.test_transcoder import _registered",
        "from chronicle.runtime.transcoder import WARM_UP, FastJSONTranscoder",
        "t = _registered(FastJSONTranscoder())",
        "data = t.encode({'a': [1, {'b': 'c'}]})",
        *lines,
    ])
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_a_process_decodes_its_first_states_without_pydantic_core_then_switches():
    assert in_a_fresh_process(
        "import sys",
        "firsts = [t.decode(data) for _ in range(WARM_UP)]",
        "before = 'pydantic_core' in sys.modules",
        "after = t.decode(data)",
        "print(before, 'pydantic_core' in sys.modules, all(f == after for f in firsts))",
    ) == ["False", "True", "True"]


def test_a_process_that_has_pydantic_core_already_uses_it_from_the_first_state():
    """The warm-up only avoids importing pydantic-core; a store opened in a running program (the
    domain's models imported it) gains nothing from decoding its first thousand states slowly."""
    assert in_a_fresh_process(
        "import pydantic_core",
        "first = t.decode(data)",
        "print(t._from_json is pydantic_core.from_json, first == {'a': [1, {'b': 'c'}]})",
    ) == ["True", "True"]
