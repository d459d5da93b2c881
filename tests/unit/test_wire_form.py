"""The history projection's shortcut for a message's wire form: a block list that already holds
exactly what `Message.wire()` would dump is stored as its content JSON, without building models.
The shortcut must never change a row: whatever the blocks, it gives what validating and dumping
them gives (or is not taken)."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chronicle.domain.content import Message, sendable
from chronicle.domain.wire_blocks import dumps_as_is
from chronicle.projections.history import dumps, wire_form

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)
TEXT = st.sampled_from(["", " ", "\n", "hi", "NaN", "Infinity ∞"]) | st.text(max_size=10)


def _block() -> st.SearchStrategy[dict[str, Any]]:
    known = st.one_of(
        st.fixed_dictionaries({"type": st.just("text"), "text": TEXT}),
        st.fixed_dictionaries({"type": st.just("thinking"), "thinking": TEXT, "signature": TEXT}),
        st.fixed_dictionaries({"type": st.just("thinking"), "thinking": TEXT}),  # default left out
        st.fixed_dictionaries({"type": st.just("redacted_thinking"), "data": TEXT}),
        st.fixed_dictionaries({"type": st.just("tool_use"), "id": TEXT, "name": TEXT,
                               "input": st.dictionaries(st.text(max_size=4), JSON, max_size=3)}),
        st.fixed_dictionaries({"type": st.just("tool_use"), "name": TEXT, "id": TEXT, "input": st.just({})}),  # key order
        st.fixed_dictionaries({"type": st.just("tool_result"), "tool_use_id": TEXT, "content": TEXT,
                               "is_error": st.booleans() | st.integers(0, 1)}),
        st.fixed_dictionaries({"type": st.just("image"), "source": st.dictionaries(st.text(max_size=4), JSON, max_size=2)}),
        st.fixed_dictionaries({"type": st.just("server_tool_use"), "id": TEXT}),  # a type we do not model
    )
    extra = st.dictionaries(st.sampled_from(["citations", "cache_control", "text"]), JSON, max_size=1)
    return st.tuples(known, extra, st.booleans()).map(lambda t: {**t[0], **t[1]} if t[2] else t[0])


def _slow(blocks: list[Any], sendable_only: bool) -> str:
    content = Message(role="user", content=blocks).content
    return dumps([b.model_dump(mode="json") for b in (sendable(list(content)) if sendable_only else content)], sort_keys=False)


@settings(max_examples=400, deadline=None)
@given(st.lists(_block(), max_size=4), st.booleans())
def test_the_shortcut_gives_what_validating_and_dumping_gives(blocks: list[dict[str, Any]], sendable_only: bool) -> None:
    assert wire_form(blocks, dumps(blocks, sort_keys=False), sendable_only) == _slow(blocks, sendable_only)


def test_blocks_as_recorded_from_the_wire_take_the_shortcut() -> None:
    recorded = [
        {"type": "thinking", "thinking": "look it up", "signature": "sig"},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"key": "a", "n": [1, 2.5]}},
    ]
    results = [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "found", "is_error": False}]
    assert dumps_as_is(recorded, sendable_only=True) and dumps_as_is(results)


def test_what_would_change_in_the_dump_does_not() -> None:
    assert not dumps_as_is([{"type": "tool_result", "tool_use_id": "t", "content": "x"}])  # is_error filled in
    assert not dumps_as_is([{"type": "tool_use", "name": "n", "id": "i", "input": {}}])  # fields reordered
    assert not dumps_as_is([{"type": "text", "text": "a", "citations": None}])  # an extra field
    assert not dumps_as_is([{"type": "text", "text": "  "}], sendable_only=True)  # left out when sent back
    assert dumps_as_is([{"type": "text", "text": "  "}])
    inf = [{"type": "tool_use", "id": "i", "name": "n", "input": {"x": math.inf}}]  # pydantic dumps it as null
    assert wire_form(inf, dumps(inf, sort_keys=False)) == _slow(inf, False)
