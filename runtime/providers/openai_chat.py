"""Chat Completions <-> our content blocks, and one streamed response rebuilt from its chunks.

Kept free of the SDK and of I/O, like assembler.py: chunks are the plain dicts the server sent,
so odd splits of text and tool-call arguments are testable without a server. Our history is
Anthropic-shaped (content blocks); the chat-completions wire is role messages with `tool_calls`
and `role: tool` answers. Conversion happens on the wire copy only: the recorded response keeps
our blocks (what the loop reads) AND the provider's own message under `raw`, as it arrived.

Token counts: chat-completions `prompt_tokens` include cached tokens, ours (the Anthropic
convention the pricing and the cost projection use) exclude them, so cached tokens move from
input to `cache_read_input_tokens`.
"""

from __future__ import annotations

import json
from typing import Any

from chronicle.domain.content import DocumentBlock, ImageBlock, Message, ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock, Usage

#: finish_reason -> our stop reason. `function_call` is the pre-tools spelling of tool_calls.
FINISH_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "content_filter": "refusal",
}
#: Non-standard reasoning fields served by vLLM / DeepSeek (`reasoning_content`) and Ollama / OpenRouter (`reasoning`).
REASONING_FIELDS = ("reasoning_content", "reasoning")


class ChunkStreamIncomplete(Exception):
    """The stream ended without a finish_reason: the response cannot be trusted as finished."""


# -- request: our messages -> chat-completions messages ----------------------------------------


def wire_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Anthropic tool definitions (name, description, input_schema) as chat-completions functions."""
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description", ""),
                "parameters": t.get("input_schema") or {"type": "object", "properties": {}},
            },
        }
        for t in tools
    ]


def wire_messages(system: str, messages: list[Message]) -> list[dict[str, Any]]:
    """Chat messages for a request: tool results become `role: tool` messages placed right after
    the assistant message that asked for them (the API refuses anything in between), and any text
    sent with them (steering) follows as a user message. Thinking blocks are not sent back: no
    chat-completions server accepts them as input."""
    wire: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    for message in messages:
        if message.role == "assistant":
            wire.append(_assistant(message))
            continue
        texts: list[str] = []
        images: list[dict[str, Any]] = []
        for block in message.content:
            if isinstance(block, ToolResultBlock):
                content = block.content if not block.is_error else f"[error] {block.content}"
                wire.append({"role": "tool", "tool_call_id": block.tool_use_id, "content": content})
            elif isinstance(block, TextBlock) and block.text:
                texts.append(block.text)
            elif isinstance(block, ImageBlock) and block.source.get("type") == "base64":
                url = f"data:{block.source.get('media_type')};base64,{block.source.get('data')}"
                images.append({"type": "image_url", "image_url": {"url": url}})
            elif isinstance(block, (ImageBlock, DocumentBlock)):
                texts.append(f"[{block.type} not sent: {block.source.get('media_type', 'unknown type')}]")
        if images:
            # Content parts only when there is an image: a text-only server still gets plain strings.
            parts = [{"type": "text", "text": "\n\n".join(texts)}] if texts else []
            wire.append({"role": "user", "content": [*parts, *images]})
        elif texts:
            wire.append({"role": "user", "content": "\n\n".join(texts)})
    return wire


def _assistant(message: Message) -> dict[str, Any]:
    text = "".join(b.text for b in message.content if isinstance(b, TextBlock))
    calls = [
        {"id": b.id, "type": "function", "function": {"name": b.name, "arguments": json.dumps(b.input, ensure_ascii=False)}}
        for b in message.content
        if isinstance(b, ToolUseBlock)
    ]
    out: dict[str, Any] = {"role": "assistant", "content": text or None}
    if calls:
        out["tool_calls"] = calls
    return out


# -- response: chunks -> one ModelResponse ------------------------------------------------------


class ChunkAssembler:
    """Feed `chat.completion.chunk` dicts in order; each call returns the live deltas it produced.

    Deltas use the names the Anthropic assembler uses (text, thinking, block_start, input_json),
    so renderers need not know which provider streamed. Block indexes: reasoning 0, text 1, then
    one per tool call in the order the server numbered them.
    """

    def __init__(self, model: str = "") -> None:
        self.model = model
        self.id = ""
        self.created: int | None = None
        self.system_fingerprint: str | None = None
        self.reasoning = ""
        self.reasoning_field = REASONING_FIELDS[0]
        self.text = ""
        self.refusal = ""
        self.calls: dict[int, dict[str, Any]] = {}
        self.finish_reason: str | None = None
        self.usage: dict[str, Any] | None = None
        self.started = False

    def feed(self, chunk: dict[str, Any]) -> list[dict[str, Any]]:
        self.started = True
        self.id = chunk.get("id") or self.id
        self.model = chunk.get("model") or self.model
        self.created = chunk.get("created") or self.created
        self.system_fingerprint = chunk.get("system_fingerprint") or self.system_fingerprint
        if chunk.get("usage"):
            self.usage = dict(chunk["usage"])
        out: list[dict[str, Any]] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue  # n=1 is what we ask for; a server sending more gets its first choice used
            out.extend(self._delta(choice.get("delta") or {}))
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return out

    def _delta(self, delta: dict[str, Any]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for name in REASONING_FIELDS:
            piece = delta.get(name)
            if isinstance(piece, str) and piece:
                self.reasoning_field = name
                self.reasoning += piece
                out.append({"type": "thinking", "index": 0, "thinking": piece})
        piece = delta.get("content")
        if isinstance(piece, str) and piece:
            self.text += piece
            out.append({"type": "text", "index": 1, "text": piece})
        if isinstance(delta.get("refusal"), str):
            self.refusal += delta["refusal"]
        for part in delta.get("tool_calls") or []:
            index = int(part.get("index", len(self.calls)))
            call = self.calls.get(index)
            function = part.get("function") or {}
            if call is None:
                call = self.calls[index] = {
                    "id": part.get("id") or "",
                    "type": "function",
                    "function": {"name": "", "arguments": ""},
                }
                out.append(
                    {
                        "type": "block_start",
                        "index": 2 + index,
                        "block": {"type": "tool_use", "id": call["id"], "name": function.get("name") or "", "input": {}},
                    }
                )
            if part.get("id"):
                call["id"] = part["id"]
            called = function.get("name")
            if called and called != call["function"]["name"]:
                # OpenAI sends the name once; some servers send it in pieces, others repeat it whole.
                call["function"]["name"] += called
            if function.get("arguments"):
                call["function"]["arguments"] += function["arguments"]
                out.append({"type": "input_json", "index": 2 + index, "partial_json": function["arguments"]})
        return out

    def raw_message(self) -> dict[str, Any]:
        """The provider's completion as a non-streamed response would have carried it."""
        message: dict[str, Any] = {"role": "assistant", "content": self.text or None}
        if self.reasoning:
            message[self.reasoning_field] = self.reasoning
        if self.refusal:
            message["refusal"] = self.refusal
        if self.calls:
            message["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        raw: dict[str, Any] = {
            "id": self.id,
            "object": "chat.completion",
            "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": self.finish_reason}],
        }
        if self.created is not None:
            raw["created"] = self.created
        if self.system_fingerprint:
            raw["system_fingerprint"] = self.system_fingerprint
        if self.usage is not None:
            raw["usage"] = self.usage
        return raw

    def response(self) -> ModelResponse:
        """The finished response; raises ChunkStreamIncomplete if no finish_reason came."""
        if not self.started or self.finish_reason is None:
            raise ChunkStreamIncomplete("the stream ended before a finish_reason")
        content: list[dict[str, Any]] = []
        if self.reasoning:
            content.append({"type": "thinking", "thinking": self.reasoning, "signature": ""})
        if self.text:
            content.append({"type": "text", "text": self.text})
        elif self.refusal:
            content.append({"type": "text", "text": self.refusal})
        for number, index in enumerate(sorted(self.calls)):
            call = self.calls[index]
            content.append(
                {
                    "type": "tool_use",
                    "id": call["id"] or f"call_{self.id or 'x'}_{number}",
                    "name": call["function"]["name"],
                    "input": _arguments(call["function"]["arguments"]),
                }
            )
        stop = FINISH_REASONS.get(self.finish_reason, "end_turn")
        if self.calls and stop == "end_turn":
            stop = "tool_use"  # some local servers say "stop" after tool calls
        return ModelResponse.model_validate(
            {
                "id": self.id,
                "content": content,
                "stop_reason": stop,
                "usage": usage_of(self.usage),
                "model": self.model,
                "raw": self.raw_message(),
            }
        )


def usage_of(usage: dict[str, Any] | None) -> Usage:
    if not usage:
        return Usage()
    cached = int(((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0)
    prompt = int(usage.get("prompt_tokens") or 0)
    return Usage(
        input_tokens=max(0, prompt - cached),
        output_tokens=int(usage.get("completion_tokens") or 0),
        cache_read_input_tokens=cached,
    )


def _arguments(raw: str) -> dict[str, Any]:
    """Tool arguments as an object. Unparseable arguments (a cut-off or confused model) keep the
    text under `_raw_arguments`, so the record shows what was sent and the tool's validation
    answers the model with an error instead of the turn crashing."""
    if not raw.strip():
        return {}
    try:
        value = json.loads(raw)
    except json.JSONDecodeError:
        return {"_raw_arguments": raw}
    return value if isinstance(value, dict) else {"_raw_arguments": raw}
