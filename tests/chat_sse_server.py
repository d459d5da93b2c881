"""A loopback server speaking the chat-completions streaming wire format (`data:` chunks, `[DONE]`).

The same server as sse_server.py (behaviour queue, recorded requests, HTTP errors, dropped
connections), with OpenAI-shaped frames: no `event:` names, one `chat.completion.chunk` per
`data:` line, a usage-only chunk last when the client asked for `include_usage`, then
`data: [DONE]`. Tests point the real `openai` SDK at it.
"""

from __future__ import annotations

import json
from typing import Any

from tests.sse_server import SSEServer, Stream, _chunks


def _chunk(
    delta: dict[str, Any], finish: str | None = None, msg_id: str = "chatcmpl-test", model: str = "local-model"
) -> dict[str, Any]:
    return {
        "id": msg_id,
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "system_fingerprint": "fp_test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }


def chat_events(
    content: list[dict[str, Any]],
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
    split: int | None = 5,
    msg_id: str = "chatcmpl-test",
    model: str = "local-model",
) -> list[tuple[str | None, Any]]:
    """Chunks for one completion: reasoning, text and tool calls (arguments split into pieces)."""
    has_tools = any(b["type"] == "tool_use" for b in content)
    finish_reason = finish_reason or ("tool_calls" if has_tools else "stop")
    events: list[tuple[str | None, Any]] = [(None, _chunk({"role": "assistant", "content": ""}, msg_id=msg_id, model=model))]
    calls = 0
    for block in content:
        if block["type"] == "reasoning":
            events += [
                (None, _chunk({"reasoning_content": c}, msg_id=msg_id, model=model)) for c in _chunks(block["text"], split)
            ]
        elif block["type"] == "text":
            events += [(None, _chunk({"content": c}, msg_id=msg_id, model=model)) for c in _chunks(block["text"], split)]
        elif block["type"] == "tool_use":
            raw = block.get("raw_json", json.dumps(block["input"]))
            first = {"index": calls, "id": block["id"], "type": "function", "function": {"name": block["name"], "arguments": ""}}
            events.append((None, _chunk({"tool_calls": [first]}, msg_id=msg_id, model=model)))
            for piece in _chunks(raw, split):
                events.append(
                    (
                        None,
                        _chunk({"tool_calls": [{"index": calls, "function": {"arguments": piece}}]}, msg_id=msg_id, model=model),
                    )
                )
            calls += 1
    events.append((None, _chunk({}, finish_reason, msg_id=msg_id, model=model)))
    tokens = {"prompt_tokens": 20, "completion_tokens": 7, **(usage or {})}
    tokens["total_tokens"] = tokens["prompt_tokens"] + tokens["completion_tokens"]
    events.append(
        (
            None,
            {
                "id": msg_id,
                "object": "chat.completion.chunk",
                "created": 1_700_000_000,
                "model": model,
                "choices": [],
                "usage": tokens,
            },
        )
    )
    events.append((None, "[DONE]"))
    return events


def chat_reply(content: list[dict[str, Any]], **kwargs: Any) -> Stream:
    delay = kwargs.pop("delay_s", 0.0)
    return Stream(chat_events(content, **kwargs), delay_s=delay)  # type: ignore[arg-type]


def error_in_stream(code: str = "server_error", message: str = "the model crashed", after_text: str = "") -> Stream:
    events = chat_events([{"type": "text", "text": after_text}] if after_text else [])[:-3]
    return Stream(events + [(None, {"error": {"message": message, "type": code, "code": code}})])  # type: ignore[arg-type]


class ChatSSEServer(SSEServer):
    def title_reply(self) -> Any:
        return chat_reply([{"type": "text", "text": "A title"}], usage={"prompt_tokens": 0, "completion_tokens": 0})


try:
    import pytest

    @pytest.fixture
    def chat_sse():
        server = ChatSSEServer().start()
        yield server
        server.stop()
except ImportError:  # pragma: no cover
    pass
