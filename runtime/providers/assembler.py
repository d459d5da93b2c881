"""Rebuilds one Messages API response from its stream events, and names the live deltas.

Kept free of the SDK and of I/O: it takes each stream event as the plain dict the API sent
(`message_start`, `content_block_start/delta/stop`, `message_delta`, `message_stop`, `ping`), so
it can be tested with arbitrary splits of text and tool JSON without a server. Blocks are kept
as the API sent them — thinking with its signature, redacted_thinking with its data, unknown
fields too — because thinking blocks must go back unchanged on the next request.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import ValidationError

from chronicle.domain.content import PARTIAL_INPUT_KEY, ModelResponse, ProviderError, Usage

#: Stop reasons our domain knows; anything newer is mapped by `_stop_reason` for the loop, and the
#: API's own value is kept on the response as `raw: {"stop_reason": …}` (ModelResponse.provider_stop_reason).
KNOWN_STOP_REASONS = {"end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"}
#: Newer API stop reasons with a known meaning in our terms.
STOP_REASON_ALIASES = {"model_context_window_exceeded": "max_tokens"}


class StreamIncomplete(Exception):
    """The stream ended before message_stop: the response cannot be trusted as finished."""


class MessageAssembler:
    """Feed events in order with `feed`; each call returns the live deltas it produced."""

    def __init__(self, model: str = "") -> None:
        self.model = model
        self.id = ""
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.stop_reason: str | None = None
        self.stop_sequence: str | None = None
        self.stop_details: dict[str, Any] | None = None
        self.usage: dict[str, Any] = {}
        self.started = False
        self.stopped = False

    def feed(self, event: dict[str, Any]) -> list[dict[str, Any]]:
        kind = event.get("type")
        if kind == "message_start":
            message = event.get("message") or {}
            self.started = True
            self.id = message.get("id") or ""
            self.model = message.get("model") or self.model
            self._merge_usage(message.get("usage"))
            return []
        if kind == "content_block_start":
            index = int(event["index"])
            block = dict(event.get("content_block") or {})
            if block.get("type") == "tool_use":
                self.json_parts[index] = []
            self.blocks[index] = block
            return [{"type": "block_start", "index": index, "block": dict(block)}]
        if kind == "content_block_delta":
            return self._delta(int(event["index"]), event.get("delta") or {})
        if kind == "content_block_stop":
            index = int(event["index"])
            self._close_tool_input(index)
            return [{"type": "block_stop", "index": index}]
        if kind == "message_delta":
            delta = event.get("delta") or {}
            if delta.get("stop_reason") is not None:
                self.stop_reason = delta["stop_reason"]
            self.stop_sequence = delta.get("stop_sequence", self.stop_sequence)
            if delta.get("stop_details") is not None:
                self.stop_details = delta["stop_details"]
            self._merge_usage(event.get("usage"))
            return []
        if kind == "message_stop":
            self.stopped = True
            return []
        return []  # ping and event types this version does not know
    def _delta(self, index: int, delta: dict[str, Any]) -> list[dict[str, Any]]:
        block = self.blocks.setdefault(index, {"type": "text", "text": ""})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta.get("text", "")
            return [{"type": "text", "index": index, "text": delta.get("text", "")}]
        if kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            return [{"type": "thinking", "index": index, "thinking": delta.get("thinking", "")}]
        if kind == "signature_delta":
            block["signature"] = block.get("signature", "") + delta.get("signature", "")
            return [{"type": "signature", "index": index}]
        if kind == "input_json_delta":
            self.json_parts.setdefault(index, []).append(delta.get("partial_json", ""))
            return [{"type": "input_json", "index": index, "partial_json": delta.get("partial_json", "")}]
        if kind == "citations_delta":
            block.setdefault("citations", [])
            if block["citations"] is None:
                block["citations"] = []
            block["citations"].append(delta.get("citation"))
            return [{"type": "citation", "index": index, "citation": delta.get("citation")}]
        return []

    def _close_tool_input(self, index: int) -> None:
        """Parse a block's streamed input JSON. Input that does not parse (cut by max_tokens or a
        broken stream) is never completed by guessing: the raw text is kept beside the `input`
        the block started with, which marks the call as cut."""
        parts = self.json_parts.pop(index, None)
        if parts is None:
            return
        raw = "".join(parts)
        block = self.blocks[index]
        if not raw.strip():
            block["input"] = block.get("input") or {}
            return
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            block["input"] = value
        else:
            block["input"] = block.get("input") or {}
            block[PARTIAL_INPUT_KEY] = raw

    def _merge_usage(self, usage: dict[str, Any] | None) -> None:
        """Usage is cumulative: message_start reports the input, message_delta the running totals.

        Every field is kept (service_tier, cache_creation, server_tool_use, inference_geo and any
        newer one); a present value overwrites, an absent or null one leaves the earlier value.
        """
        for key, value in (usage or {}).items():
            if value is not None:
                self.usage[key] = value

    def content(self) -> list[dict[str, Any]]:
        for index in list(self.json_parts):
            self._close_tool_input(index)
        return [self.blocks[i] for i in sorted(self.blocks)]

    def response(self) -> ModelResponse:
        """The finished response; raises StreamIncomplete if message_stop never came."""
        if not self.started or not self.stopped:
            raise StreamIncomplete("the stream ended before message_stop")
        content = self.content()
        return self._build(content, _stop_reason(self.stop_reason, content))

    def partial(self, stop_reason: str, error: ProviderError | None = None) -> ModelResponse:
        """What arrived before a cancel or a failure: the answering model, the usage reported so far
        (message_start's input tokens are billed), and the blocks already streamed."""
        return self._build(self.content(), stop_reason, error)

    def _build(self, content: list[dict[str, Any]], stop_reason: str, error: ProviderError | None = None) -> ModelResponse:
        unknown = self.stop_reason is not None and self.stop_reason not in KNOWN_STOP_REASONS
        return ModelResponse(
            raw={"stop_reason": self.stop_reason} if unknown else None,  # what the API said, where ours is not it
            id=self.id,
            content=content,  # type: ignore[arg-type]
            stop_reason=stop_reason,  # type: ignore[arg-type]
            stop_sequence=self.stop_sequence,
            stop_details=self.stop_details,
            usage=_usage(self.usage),
            model=self.model,
            error=error,
        )


def _usage(raw: dict[str, Any]) -> Usage:
    try:
        return Usage.model_validate(raw)
    except ValidationError:
        # A field of a shape we do not expect: keep the token counts that parse, drop nothing else silently.
        counts = {k: v for k, v in raw.items() if isinstance(v, int) and not isinstance(v, bool)}
        return Usage.model_validate({**counts, "unparsed": raw})


def _stop_reason(raw: str | None, content: list[dict[str, Any]]) -> str:
    if raw in KNOWN_STOP_REASONS:
        return raw
    if raw in STOP_REASON_ALIASES:
        return STOP_REASON_ALIASES[raw]
    return "tool_use" if any(b.get("type") == "tool_use" for b in content) else "end_turn"
