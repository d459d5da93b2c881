"""The stream assembler rebuilds exactly what the API sent, however the deltas are cut."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chronicle.runtime.providers.assembler import MessageAssembler, StreamIncomplete
from tests.sse_server import message_events

NASTY_TEXT = st.text(alphabet=st.sampled_from(list("aé日本👋\u0301\"\\\n{}:, ")), max_size=40)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | NASTY_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(NASTY_TEXT, inner, max_size=3),
    max_leaves=8,
)


def assemble(events):
    assembler = MessageAssembler("m")
    deltas = []
    for _, event in events:
        deltas.extend(assembler.feed(event))
    return assembler, deltas


@settings(max_examples=60, deadline=None)
@given(
    text=NASTY_TEXT,
    tool_input=st.dictionaries(NASTY_TEXT, JSON_VALUES, max_size=4),
    ascii_escapes=st.booleans(),
    cuts=st.lists(st.integers(0, 400), max_size=12),
)
def test_text_and_tool_input_survive_any_split_of_their_deltas(text, tool_input, ascii_escapes, cuts):
    raw = json.dumps(tool_input, ensure_ascii=ascii_escapes)
    content = [{"type": "text", "text": text}, {"type": "tool_use", "id": "tu_1", "name": "t", "input": tool_input, "raw_json": raw}]
    assembler, deltas = assemble(message_events(content, stop_reason="tool_use", split=cuts))
    response = assembler.response()
    assert response.content[0].text == text
    assert response.content[1].input == tool_input
    assert "".join(d["text"] for d in deltas if d["type"] == "text") == text
    assert "".join(d["partial_json"] for d in deltas if d["type"] == "input_json") == raw


def test_thinking_keeps_its_signature_and_redacted_thinking_its_data():
    content = [
        {"type": "thinking", "thinking": "Let me think… 日本", "signature": "EqQBCkYIARgCIkDn+/sig=="},
        {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"},
        {"type": "text", "text": "Answer."},
    ]
    assembler, deltas = assemble(message_events(content, split=3))
    dumped = [b.model_dump(mode="json") for b in assembler.response().content]
    assert dumped == content
    assert [d["type"] for d in deltas if d["type"] in ("block_start",)] == ["block_start"] * 3


@pytest.mark.parametrize("stop", ["end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"])
def test_every_stop_reason_of_the_api_is_recorded_as_sent(stop):
    sequence = "END" if stop == "stop_sequence" else None
    assembler, _ = assemble(message_events([{"type": "text", "text": "x"}], stop_reason=stop, stop_sequence=sequence))
    response = assembler.response()
    assert response.stop_reason == stop
    assert response.stop_sequence == ("END" if stop == "stop_sequence" else None)


def test_a_newer_context_window_stop_reason_counts_as_max_tokens_and_is_kept_as_sent():
    assembler, _ = assemble(message_events([{"type": "text", "text": "x"}], stop_reason="model_context_window_exceeded"))
    response = assembler.response()
    assert response.stop_reason == "max_tokens"
    assert response.raw == {"stop_reason": "model_context_window_exceeded"}
    assert response.provider_stop_reason == "model_context_window_exceeded"


def test_an_unknown_stop_reason_is_read_as_the_nearest_of_ours_and_kept_as_sent():
    tool = {"type": "tool_use", "id": "tu_1", "name": "read_file", "input": {"path": "a"}}
    for content, ours in (([{"type": "text", "text": "x"}], "end_turn"), ([tool], "tool_use")):
        response = assemble(message_events(content, stop_reason="brand_new_reason"))[0].response()
        assert response.stop_reason == ours and response.provider_stop_reason == "brand_new_reason"
        assert response.model_dump(mode="json")["raw"] == {"stop_reason": "brand_new_reason"}


@pytest.mark.parametrize("stop", ["end_turn", "tool_use", "max_tokens"])
def test_a_known_stop_reason_adds_nothing_to_the_record(stop):
    response = assemble(message_events([{"type": "text", "text": "x"}], stop_reason=stop))[0].response()
    assert "raw" not in response.model_dump(mode="json") and response.provider_stop_reason == stop


def test_usage_keeps_cache_tokens_from_message_start_and_output_from_message_delta():
    events = message_events(
        [{"type": "text", "text": "hi"}],
        usage={"input_tokens": 12, "output_tokens": 34, "cache_creation_input_tokens": 500, "cache_read_input_tokens": 9000},
    )
    usage = assemble(events)[0].response().usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_creation_input_tokens, usage.cache_read_input_tokens) == (12, 34, 500, 9000)


def test_a_stream_without_message_stop_is_not_a_finished_response():
    events = message_events([{"type": "text", "text": "hi"}])[:-1]
    with pytest.raises(StreamIncomplete):
        assemble(events)[0].response()


@pytest.mark.parametrize("with_block_stop", [True, False], ids=["block_stop_sent", "stream_ends_in_block"])
def test_tool_input_cut_at_max_tokens_is_kept_raw_and_never_completed(with_block_stop):
    raw = '{"path": "a.txt", "content": "hel'
    content = [{"type": "tool_use", "id": "tu_1", "name": "write_file", "input": {}, "raw_json": raw}]
    events = [e for e in message_events(content, stop_reason="max_tokens") if with_block_stop or e[0] != "content_block_stop"]
    response = assemble(events)[0].response()
    assert response.stop_reason == "max_tokens"
    block = response.content[0]
    assert block.input == {} and block.cut and block.partial_input_json == raw
    stored = response.model_dump(mode="json")["content"][0]
    assert stored["input"] == {} and stored["partial_input_json"] == raw  # nothing the model never wrote
    assert response.cut_tool_uses == [block]


def test_a_complete_tool_input_is_not_marked_cut():
    content = [{"type": "tool_use", "id": "tu_1", "name": "read_file", "input": {"path": "a"}}]
    response = assemble(message_events(content, stop_reason="max_tokens"))[0].response()
    assert response.content[0].input == {"path": "a"} and not response.content[0].cut


def test_unknown_blocks_events_and_fields_are_kept_and_never_fail_the_response():
    from tests.sse_server import FULL_USAGE, web_search_blocks

    blocks = [*web_search_blocks(), {"type": "brand_new_block", "data": [1, {"x": None}]}]
    events = message_events(blocks, usage=FULL_USAGE, model="claude-x-20261101")
    events.insert(3, ("brand_new_event", {"type": "brand_new_event", "whatever": 1}))
    response = assemble(events)[0].response()
    assert response.model_dump(mode="json")["content"] == blocks
    assert response.model == "claude-x-20261101" and response.usage.model_dump(mode="json") == FULL_USAGE
    assert response.text == "Let me search.Event sourcing records every change."


def test_usage_fields_absent_or_null_in_message_delta_keep_message_start_values():
    events = message_events([{"type": "text", "text": "hi"}], usage={"input_tokens": 50, "service_tier": "priority"},
                            final_usage={"output_tokens": 9, "input_tokens": None, "server_tool_use": {"web_search_requests": 1}})
    usage = assemble(events)[0].response().usage
    assert (usage.input_tokens, usage.output_tokens, usage.service_tier) == (50, 9, "priority")
    assert usage.server_tool_use == {"web_search_requests": 1}


def test_stop_details_of_a_refusal_are_recorded():
    details = {"type": "refusal", "category": "cyber", "explanation": "no"}
    events = message_events([{"type": "text", "text": ""}], stop_reason="refusal", stop_details=details)
    response = assemble(events)[0].response()
    assert response.stop_reason == "refusal" and response.stop_details == details


def test_a_partial_response_keeps_model_usage_and_the_blocks_streamed_so_far():
    content = [{"type": "text", "text": "Half an answer"}, {"type": "tool_use", "id": "t", "name": "w", "input": {"a": "long"}}]
    events = message_events(content, usage={"input_tokens": 77}, model="claude-y", split=5)
    assembler, _ = assemble([e for e in events if e[0] != "message_stop"][:-4])  # stops inside the tool input
    with pytest.raises(StreamIncomplete):
        assembler.response()
    partial = assembler.partial("aborted")
    assert partial.stop_reason == "aborted" and partial.model == "claude-y" and partial.usage.input_tokens == 77
    assert partial.content[0].text == "Half an answer" and partial.content[1].cut and partial.content[1].input == {}


def test_duplicate_tool_use_ids_are_passed_through_not_deduplicated():
    content = [{"type": "tool_use", "id": "dup", "name": "a", "input": {}}, {"type": "tool_use", "id": "dup", "name": "b", "input": {}}]
    response = assemble(message_events(content, stop_reason="tool_use"))[0].response()
    assert [(b.id, b.name) for b in response.tool_uses] == [("dup", "a"), ("dup", "b")]
