"""A conversation put together from stored wire text (projections/wire_text.py): the spans and rows
of `history --at` joined as one JSON array, or parsed segment by segment, say the same messages
as joining every turn at once, which is how `assemble_context` merges roles."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from chronicle.projections.wire_text import joined, joined_values, segment

ROLES = st.sampled_from(["user", "assistant"])
CONTENT = st.lists(st.text(max_size=8), min_size=1, max_size=3).map(
    lambda texts: json.dumps([{"type": "text", "text": t} for t in texts], separators=(",", ":")))
TURN = st.lists(st.tuples(ROLES, CONTENT), max_size=4)


@given(turns=st.lists(TURN, max_size=12), cuts=st.lists(st.integers(min_value=0, max_value=12), max_size=4))
def test_segments_joined_or_parsed_one_by_one_say_what_one_segment_of_every_turn_says(turns, cuts):
    bounds = sorted({0, len(turns), *(c for c in cuts if c <= len(turns))})
    segments = [segment(turns[a:b]) for a, b in zip(bounds[:-1], bounds[1:], strict=True)]  # None for a run with no message
    whole = segment(turns)
    expected = json.loads(whole.text) if whole is not None else []
    assert json.loads(joined(segments)) == expected
    assert joined_values(segments, json.loads) == expected


def test_a_seam_between_two_segments_of_one_role_merges_their_messages():
    first = segment([[("user", '[{"type":"text","text":"a"}]'), ("assistant", '[{"type":"text","text":"b"}]')]])
    second = segment([[("assistant", '[{"type":"text","text":"c"}]'), ("user", '[{"type":"text","text":"d"}]')]])
    assert joined_values([first, None, second], json.loads) == [
        {"role": "user", "content": [{"type": "text", "text": "a"}]},
        {"role": "assistant", "content": [{"type": "text", "text": "b"}, {"type": "text", "text": "c"}]},
        {"role": "user", "content": [{"type": "text", "text": "d"}]},
    ]
