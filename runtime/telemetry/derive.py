"""Spans from the log: the one function that turns a recorded turn into OpenTelemetry GenAI spans.

Live tracing and `chronicle export-traces` both call `derive_turn_spans` on a TurnLog loaded
from the store, so a trace exported a year later is the trace that was sent live, span for
span. Ids are derived from aggregate ids (trace id = the top-level turn's id; span ids hashed
from the turn, step or tool call), which makes a re-export idempotent in any backend that
de-duplicates by id, and lets a sub-agent's spans name their parent (the delegate call's
`execute_tool` span) without both being in memory at once.

Shape (GenAI semantic conventions): `invoke_agent {agent}` per turn; under it `chat {model}`
per model call and `execute_tool {tool}` per tool call; a sub-agent's `invoke_agent` under the
delegating `execute_tool`. Retries are events on the `chat` span, approvals on `execute_tool`,
interruptions and resumes on `invoke_agent`. Message content is included only when asked.
Pure: no I/O, no OpenTelemetry import (export.py turns SpanRecords into SDK spans).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal
from uuid import UUID, uuid5

from chronicle.domain.stored_response import expand

from .records import LogEvent, TurnLog

SPAN_NS = UUID("6f1c5a0e-8f43-5b63-9d1e-2b7c0c6a9e41")
TURN_END_KINDS = {"Completed": "completed", "Failed": "failed", "Cancelled": "cancelled", "Stopped": "stopped"}
TOOL_END_KINDS = {"Completed", "Failed", "Skipped", "Cancelled", "Denied", "Interrupted"}
#: spec.provider -> gen_ai.provider.name (well-known values where there is one).
PROVIDER_NAMES = {"anthropic": "anthropic", "openai-compatible": "openai"}

Attributes = dict[str, str | bool | int | float | list[str]]


@dataclass
class SpanEvent:
    name: str
    at: datetime
    attributes: Attributes = field(default_factory=dict)


@dataclass
class SpanRecord:
    name: str
    trace_id: int
    span_id: int
    parent_span_id: int | None
    kind: Literal["internal", "client"]
    start: datetime
    end: datetime
    attributes: Attributes = field(default_factory=dict)
    events: list[SpanEvent] = field(default_factory=list)
    error: str | None = None  # the status description when the span failed

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "trace_id": f"{self.trace_id:032x}",
            "span_id": f"{self.span_id:016x}",
            "parent_span_id": f"{self.parent_span_id:016x}" if self.parent_span_id is not None else None,
            "kind": self.kind,
            "start": self.start.isoformat(),
            "end": self.end.isoformat(),
            "attributes": self.attributes,
            "events": [{"name": e.name, "at": e.at.isoformat(), "attributes": e.attributes} for e in self.events],
            "status": "error" if self.error is not None else "ok",
            "error": self.error,
        }


def span_id(*parts: object) -> int:
    """A stable, non-zero 64-bit span id for a thing in the log."""
    value = uuid5(SPAN_NS, "/".join(str(p) for p in parts)).int >> 64
    return value or 1


def agent_span_id(turn_id: UUID) -> int:
    return span_id("invoke_agent", turn_id)


def tool_span_id(call_id: UUID) -> int:
    return span_id("execute_tool", call_id)


def derive_turn_spans(log: TurnLog, capture_content: bool = False) -> list[SpanRecord]:
    """The spans of one turn: its invoke_agent span first, then chat and execute_tool spans by start time."""
    if not log.events:
        return []
    trace_id = log.root_turn_id.int
    root = agent_span_id(log.turn_id)
    provider = PROVIDER_NAMES.get(
        log.provider, "chronicle.scripted" if log.provider.startswith("scripted:") else log.provider or "unknown"
    )
    common: Attributes = {"gen_ai.provider.name": provider, "gen_ai.conversation.id": str(log.session_id)}
    created = log.events[0]
    end_event = next((e for e in log.events if e.kind in TURN_END_KINDS), None)
    status = TURN_END_KINDS[end_event.kind] if end_event else "in_flight"
    agent = SpanRecord(
        name=f"invoke_agent {log.agent}",
        trace_id=trace_id,
        span_id=root,
        parent_span_id=tool_span_id(log.parent_tool_call_id) if log.parent_tool_call_id else None,
        kind="internal",
        start=created.at,
        end=(end_event or log.events[-1]).at,
        attributes={
            **common,
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.agent.name": log.agent,
            "gen_ai.agent.id": str(log.session_id),
            "gen_ai.request.model": log.model,
            "chronicle.turn.id": str(log.turn_id),
            "chronicle.turn.number": int(created.data.get("number", 0)),
            "chronicle.turn.status": status,
        },
    )
    if end_event is not None and status != "completed":
        agent.error = str(end_event.data.get("reason") or status)
        agent.attributes["error.type"] = _turn_error_type(end_event)
    spans = [agent]
    #: Every gen_ai.usage.* of the turn's chat spans, summed (docs/operations.md): cached input tokens too.
    usage_keys = ("input_tokens", "output_tokens", "cache_read.input_tokens", "cache_creation.input_tokens")
    usage_total = dict.fromkeys(usage_keys, 0)
    for event in log.events:
        if event.kind in ("Interrupted", "Resumed", "ApprovalRequested"):
            attributes: Attributes = {"chronicle.reason": str(event.data["reason"])} if event.data.get("reason") else {}
            agent.events.append(SpanEvent(f"chronicle.turn.{event.kind.lower()}", event.at, attributes))
        elif event.kind == "ModelResponded":
            chat = _chat_span(log, event, trace_id, root, common, capture_content)
            chat.events = [
                _retry_event(r) for r in log.events if r.kind == "ModelCallRetried" and r.data.get("step") == event.data["step"]
            ]
            for key in usage_keys:
                usage_total[key] += int(chat.attributes.get(f"gen_ai.usage.{key}", 0))  # type: ignore[arg-type]
            spans.append(chat)
    for key in usage_keys:
        agent.attributes[f"gen_ai.usage.{key}"] = usage_total[key]
    for call_id, events in log.tool_calls.items():
        spans.append(_tool_span(call_id, events, trace_id, root, common, capture_content))
    if capture_content:
        agent.attributes["gen_ai.input.messages"] = _json(
            [{"role": "user", "parts": [{"type": "text", "content": created.data.get("input_text", "")}]}]
        )
        if log.instructions:
            agent.attributes["gen_ai.system_instructions"] = _json([{"type": "text", "content": log.instructions}])
        if end_event is not None and end_event.kind == "Completed":
            agent.attributes["gen_ai.output.messages"] = _json(
                [
                    {
                        "role": "assistant",
                        "parts": [{"type": "text", "content": end_event.data.get("final_text", "")}],
                        "finish_reason": "stop",
                    }
                ]
            )
    return [agent, *sorted(spans[1:], key=lambda s: s.start)]


def _turn_error_type(event: LogEvent) -> str:
    error = event.data.get("error") or {}
    if event.kind == "Stopped":
        return f"guard:{event.data.get('guard', 'guard')}"
    if isinstance(error, dict) and error.get("kind"):
        return str(error["kind"])
    return TURN_END_KINDS.get(event.kind, "error")


def _finish_reason(response: dict[str, Any]) -> str:
    """The stop reason as the provider sent it (ModelResponse.provider_stop_reason): a trace says
    `model_context_window_exceeded` where our own `stop_reason`, which the loop decides by, says max_tokens."""
    said = (response.get("raw") or {}).get("stop_reason")
    return said if isinstance(said, str) and said else str(response.get("stop_reason", ""))


def _chat_span(log: TurnLog, event: LogEvent, trace_id: int, parent: int, common: Attributes, capture: bool) -> SpanRecord:
    response: dict[str, Any] = expand(event.data.get("response") or {})
    delta: dict[str, Any] = event.data.get("request_delta") or {}
    usage: dict[str, Any] = response.get("usage") or {}
    step = int(event.data["step"])
    requested = str(delta.get("model") or log.model)
    cache_read, cache_write = int(usage.get("cache_read_input_tokens", 0)), int(usage.get("cache_creation_input_tokens", 0))
    attributes: Attributes = {
        **common,
        "gen_ai.operation.name": "chat",
        "gen_ai.request.model": requested,
        # The conventions count every input token, cached ones included; ours exclude them.
        "gen_ai.usage.input_tokens": int(usage.get("input_tokens", 0)) + cache_read + cache_write,
        "gen_ai.usage.output_tokens": int(usage.get("output_tokens", 0)),
        "gen_ai.usage.cache_read.input_tokens": cache_read,
        "gen_ai.usage.cache_creation.input_tokens": cache_write,
        "gen_ai.response.finish_reasons": [_finish_reason(response)],
        "chronicle.step": step,
        "chronicle.attempts": int(event.data.get("attempts", 1)),
    }
    if response.get("model"):
        attributes["gen_ai.response.model"] = str(response["model"])
    if response.get("id"):
        attributes["gen_ai.response.id"] = str(response["id"])
    if response.get("request_id"):  # the conventions name no request id; the provider's support asks for it
        attributes["chronicle.provider.request_id"] = str(response["request_id"])
    if delta.get("max_tokens"):
        attributes["gen_ai.request.max_tokens"] = int(delta["max_tokens"])
    if event.data.get("fingerprint"):
        attributes["chronicle.request.fingerprint"] = str(event.data["fingerprint"])
    span = SpanRecord(
        name=f"chat {requested}",
        trace_id=trace_id,
        span_id=span_id("chat", log.turn_id, step),
        parent_span_id=parent,
        kind="client",
        start=event.at - timedelta(milliseconds=float(event.data.get("latency_ms", 0.0))),
        end=event.at,
        attributes=attributes,
    )
    error = response.get("error")
    if response.get("stop_reason") == "error":
        span.error = str((error or {}).get("message") or "model call failed")
        attributes["error.type"] = str((error or {}).get("kind") or "error")
    if capture:
        attributes["gen_ai.output.messages"] = _json(
            [
                {
                    "role": "assistant",
                    "parts": _parts(response.get("content") or []),
                    "finish_reason": _finish_reason(response),
                }
            ]
        )
    return span


def _retry_event(event: LogEvent) -> SpanEvent:
    error = event.data.get("error") or {}
    attributes: Attributes = {
        "chronicle.retry.attempt": int(event.data.get("attempt", 0)),
        "chronicle.retry.delay_s": float(event.data.get("delay_s", 0.0)),
        "error.type": str(error.get("kind") or "error"),
        "chronicle.reason": str(event.data.get("reason", "")),
    }
    if error.get("status") is not None:
        attributes["http.response.status_code"] = int(error["status"])
    return SpanEvent("chronicle.model_call.retry", event.at, attributes)


def _run_start(ended: LogEvent | None) -> datetime | None:
    """When a run recorded whole by its end event (no Started, `attempt` set) began: end less duration."""
    if ended is None or not ended.data.get("attempt"):
        return None
    return ended.at - timedelta(milliseconds=float(ended.data.get("duration_ms") or 0.0))


def _tool_span(
    call_id: UUID, events: list[LogEvent], trace_id: int, parent: int, common: Attributes, capture: bool
) -> SpanRecord:
    requested = events[0].data
    ended = next((e for e in reversed(events) if e.kind in TOOL_END_KINDS), None)
    start = next((e.at for e in events if e.kind == "Started"), None) or _run_start(ended) or events[0].at
    name = str(requested.get("name", "tool"))
    attributes: Attributes = {
        **common,
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
        "gen_ai.tool.type": "extension" if "__" in name else "function",  # SERVER__tool: an MCP tool
        "gen_ai.tool.call.id": str(requested.get("tool_use_id", "")),
        "chronicle.tool_call.id": str(call_id),
        "chronicle.tool_call.status": ended.kind.lower() if ended else "in_flight",
    }
    span = SpanRecord(
        name=f"execute_tool {name}",
        trace_id=trace_id,
        span_id=tool_span_id(call_id),
        parent_span_id=parent,
        kind="internal",
        start=start,
        end=(ended or events[-1]).at,
        attributes=attributes,
    )
    for event in events:
        if event.kind in ("ApprovalRequested", "Approved", "Denied"):
            extra: Attributes = {
                k: v for k, v in (("chronicle.by", event.data.get("by")), ("chronicle.reason", event.data.get("reason"))) if v
            }
            span.events.append(SpanEvent(f"chronicle.approval.{event.kind.lower()}", event.at, extra))
    if ended is not None and (ended.kind != "Completed" or ended.data.get("is_error")):
        span.error = str(ended.data.get("reason") or ended.data.get("error") or ended.data.get("output") or ended.kind.lower())[
            :500
        ]
        attributes["error.type"] = "tool_error" if ended.kind in ("Completed", "Failed") else ended.kind.lower()
    if capture:
        attributes["gen_ai.tool.call.arguments"] = _json(requested.get("input", {}))
        if ended is not None and ended.kind in ("Completed", "Failed"):
            attributes["gen_ai.tool.call.result"] = str(ended.data.get("output") or ended.data.get("error") or "")
    return span


def _parts(content: list[dict[str, Any]]) -> list[dict[str, Any]]:
    parts: list[dict[str, Any]] = []
    for block in content:
        if block.get("type") == "text":
            parts.append({"type": "text", "content": block.get("text", "")})
        elif block.get("type") == "thinking":
            parts.append({"type": "reasoning", "content": block.get("thinking", "")})
        elif block.get("type") == "tool_use":
            parts.append({"type": "tool_call", "id": block.get("id"), "name": block.get("name"), "arguments": block.get("input")})
    return parts


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, default=str)
