"""Chat-completions chunks rebuilt into one response, whatever the server's splits and quirks."""

from __future__ import annotations

import pytest

from chronicle.domain.content import ImageBlock, Message, TextBlock, ToolResultBlock, ToolUseBlock
from chronicle.runtime.providers.openai_chat import ChunkAssembler, ChunkStreamIncomplete, wire_messages


def chunk(delta: dict, finish: str | None = None) -> dict:
    return {"id": "c1", "model": "m", "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_a_tool_name_repeated_whole_in_every_piece_is_not_doubled_and_bad_arguments_are_kept_raw():
    assembler = ChunkAssembler()
    assembler.feed(chunk({"tool_calls": [{"index": 0, "id": "t1", "function": {"name": "read_file", "arguments": '{"pa'}}]}))
    assembler.feed(chunk({"tool_calls": [{"index": 0, "function": {"name": "read_file", "arguments": 'th": 1'}}]}))
    assembler.feed(chunk({}, "stop"))  # a local server saying "stop" after tool calls
    response = assembler.response()
    assert response.stop_reason == "tool_use"
    block = response.tool_uses[0]
    assert block.name == "read_file" and block.input == {"_raw_arguments": '{"path": 1'}


def test_a_stream_without_finish_reason_is_incomplete():
    assembler = ChunkAssembler()
    assembler.feed(chunk({"content": "half"}))
    with pytest.raises(ChunkStreamIncomplete):
        assembler.response()


def test_steering_text_sent_with_tool_results_follows_the_tool_messages():
    messages = [
        Message(role="user", content=[TextBlock(text="go")]),
        Message(role="assistant", content=[ToolUseBlock(id="t1", name="ls", input={})]),
        Message(role="user", content=[ToolResultBlock(tool_use_id="t1", content="a b"), TextBlock(text="also check c")]),
    ]
    wire = wire_messages("", messages)
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "user"]
    assert wire[1] == {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}],
    }
    assert wire[3]["content"] == "also check c"


def test_images_go_as_data_url_parts_after_the_tool_messages_and_text_stays_a_string_without_them():
    png = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    messages = [
        Message(role="user", content=[TextBlock(text="go")]),
        Message(role="assistant", content=[ToolUseBlock(id="t1", name="shot", input={})]),
        Message(role="user", content=[ToolResultBlock(tool_use_id="t1", content="[image: image/png, 8 bytes]"),
                                      TextBlock(text="[image returned by shot (t1)]"), ImageBlock(source=png)]),
    ]
    wire = wire_messages("", messages)
    assert [m["role"] for m in wire] == ["user", "assistant", "tool", "user"]
    assert wire[0]["content"] == "go"
    assert wire[3]["content"] == [{"type": "text", "text": "[image returned by shot (t1)]"},
                                  {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]
