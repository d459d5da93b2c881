"""The compaction summary's request: the conversation as a plain-text transcript, valid on the wire
without tools (runtime/summary_request.py)."""

from __future__ import annotations

from chronicle.domain.content import Message, load_blocks
from chronicle.runtime.summary_request import MAX_RESULT_CHARS, SUMMARY_PROMPT, SUMMARY_SYSTEM, summary_request, transcript


def message(role: str, *blocks: dict) -> Message:
    return Message(role=role, content=load_blocks(list(blocks)))


CONVERSATION = [
    message("user", {"type": "text", "text": "Look at this"},
            {"type": "image", "source": {"type": "attachment", "media_type": "image/png", "sha256": "ab", "size": 3, "name": "shot.png"}},
            {"type": "document", "source": {"type": "attachment", "media_type": "application/pdf", "sha256": "cd", "size": 9}}),
    message("assistant", {"type": "thinking", "thinking": "private musing", "signature": "sig"},
            {"type": "redacted_thinking", "data": "EmwK"},
            {"type": "text", "text": "Running it."},
            {"type": "tool_use", "id": "tu_1", "name": "bash", "input": {"command": "ls -la", "timeout": 5}},
            {"type": "tool_use", "id": "tu_2", "name": "read_file", "input": {"path": "gone.txt"}}),
    message("user", {"type": "tool_result", "tool_use_id": "tu_1", "content": "a.txt\nb.txt"},
            {"type": "tool_result", "tool_use_id": "tu_2", "content": "no such file", "is_error": True}),
    message("assistant", {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {"query": "pytest"}},
            {"type": "web_search_tool_result", "tool_use_id": "srv_1", "content": [{"type": "web_search_result", "url": "u"}]},
            {"type": "text", "text": " "}),
]


def test_the_transcript_says_who_spoke_names_tool_calls_results_and_attachments_and_leaves_thinking_out():
    assert transcript(CONVERSATION) == (
        "User:\nLook at this\n[image shot.png]\n[document]\n\n"
        'Assistant:\nRunning it.\n[tool call bash {"command": "ls -la", "timeout": 5}]\n[tool call read_file {"path": "gone.txt"}]\n\n'
        "User:\n[tool result bash: a.txt\nb.txt]\n[tool error read_file: no such file]\n\n"
        'Assistant:\n[server_tool_use web_search {"query": "pytest"}]\n[web_search_tool_result]'
    )


def test_long_results_keep_head_and_tail_and_long_inputs_their_head():
    output = "".join(f"line {i:05d}\n" for i in range(2_000))
    written = "x" * 50_000
    text = transcript([
        message("assistant", {"type": "tool_use", "id": "t", "name": "write_file", "input": {"path": "big", "content": written}}),
        message("user", {"type": "tool_result", "tool_use_id": "t", "content": output}),
    ])
    assert len(text) < 2 * MAX_RESULT_CHARS + 500
    assert "line 00000" in text and "line 01999" in text and "line 01000" not in text
    assert "characters left out" in text and "more characters]" in text and written not in text


def test_a_cut_tool_input_is_shown_as_the_model_wrote_it():
    cut = {"type": "tool_use", "id": "t", "name": "write_file", "input": {}, "partial_input_json": '{"path": "a.txt", "con'}
    blocks = load_blocks([cut])
    assert blocks[0].cut
    assert transcript([Message(role="assistant", content=blocks)]) == 'Assistant:\n[tool call write_file {"path": "a.txt", "con]'


def test_the_request_is_one_user_message_of_text_with_no_tools():
    request = summary_request(CONVERSATION, model="claude-haiku-4-5", agent="main", session_id="s", call_index=3, turn_number=2)
    assert (request.model, request.system, request.tools, request.auxiliary) == ("claude-haiku-4-5", SUMMARY_SYSTEM, [], "summary")
    assert (request.call_index, request.turn_number, request.agent, request.session_id) == (3, 2, "main", "s")
    wire = [m.wire() for m in request.messages]
    assert [m["role"] for m in wire] == ["user"] and [b["type"] for b in wire[0]["content"]] == ["text"]
    sent = wire[0]["content"][0]["text"]
    assert sent.startswith("<conversation>\nUser:\nLook at this") and sent.endswith(SUMMARY_PROMPT)
    assert not [b for m in wire for b in m["content"] if b["type"] in ("tool_use", "tool_result")]
