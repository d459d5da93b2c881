"""The span derivation as a pure function of recorded events: statuses, ids, content gating."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from uuid import uuid4

from chronicle.runtime.telemetry.derive import agent_span_id, derive_turn_spans, tool_span_id
from chronicle.runtime.telemetry.records import LogEvent, TurnLog

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=timezone.utc)


def at(seconds: float) -> datetime:
    return T0 + timedelta(seconds=seconds)


def turn_log(events: list[LogEvent], tool_calls: dict | None = None, parent=None) -> TurnLog:
    turn_id = uuid4()
    return TurnLog(session_id=uuid4(), turn_id=turn_id, agent="main", provider="anthropic", model="claude-x", instructions="Be kind.",
                   root_turn_id=turn_id, parent_tool_call_id=parent, events=events, tool_calls=tool_calls or {})


def responded(step: int, seconds: float, stop: str = "tool_use", error: dict | None = None) -> LogEvent:
    response = {"id": f"msg_{step}", "model": "claude-x-1", "stop_reason": stop, "content": [{"type": "text", "text": "hi"}],
                "usage": {"input_tokens": 10, "output_tokens": 2, "cache_read_input_tokens": 30, "cache_creation_input_tokens": 5}}
    if error:
        response["error"] = error
    return LogEvent("ModelResponded", at(seconds), {"step": step, "response": response, "latency_ms": 500.0, "attempts": 1,
                                                    "request_delta": {"model": "claude-x", "max_tokens": 1024}, "fingerprint": "f"})


def test_a_failed_model_call_fails_its_chat_span_and_the_turn_with_the_providers_error_kind():
    error = {"kind": "overloaded_error", "message": "Overloaded (HTTP 529)"}
    log = turn_log([
        LogEvent("Created", at(0), {"number": 1, "input_text": "secret question"}),
        LogEvent("Started", at(0.1), {}),
        LogEvent("ModelCallRetried", at(0.5), {"step": 0, "attempt": 1, "reason": "overloaded", "delay_s": 2.0,
                                               "error": {"kind": "overloaded_error", "status": 529}}),
        responded(0, 3, stop="error", error=error),
        LogEvent("Failed", at(3.1), {"reason": "model call failed: Overloaded", "error": error}),
    ])
    agent, chat = derive_turn_spans(log)
    assert agent.span_id == agent_span_id(log.turn_id) and agent.parent_span_id is None and agent.trace_id == log.turn_id.int
    assert agent.error == "model call failed: Overloaded" and agent.attributes["error.type"] == "overloaded_error"
    assert chat.error == "Overloaded (HTTP 529)" and chat.attributes["error.type"] == "overloaded_error"
    assert chat.start == at(2.5) and chat.end == at(3)
    assert chat.attributes["gen_ai.usage.input_tokens"] == 45 and chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 30
    summed = {k: v for k, v in agent.attributes.items() if k.startswith("gen_ai.usage.")}
    assert summed == {"gen_ai.usage.input_tokens": 45, "gen_ai.usage.output_tokens": 2,
                      "gen_ai.usage.cache_read.input_tokens": 30, "gen_ai.usage.cache_creation.input_tokens": 5}
    assert [e.attributes["http.response.status_code"] for e in chat.events] == [529]
    assert "gen_ai.input.messages" not in agent.attributes


def test_a_denied_tool_is_an_error_span_with_its_approval_events_and_content_only_when_captured():
    call_id, parent_call = uuid4(), uuid4()
    tool_events = [
        LogEvent("Requested", at(1), {"name": "bash", "tool_use_id": "tu_1", "input": {"command": "rm -rf x"}}),
        LogEvent("ApprovalRequested", at(1.1), {}),
        LogEvent("Denied", at(5), {"reason": "not that", "by": "ann@host"}),
    ]
    log = turn_log([LogEvent("Created", at(0), {"number": 2, "input_text": "clean up"}), responded(0, 1)],
                   tool_calls={call_id: tool_events}, parent=parent_call)
    spans = derive_turn_spans(log, capture_content=True)
    agent, tool = spans[0], next(s for s in spans if s.name == "execute_tool bash")
    assert agent.parent_span_id == tool_span_id(parent_call), "a sub-agent turn sits under its delegate call"
    assert agent.attributes["chronicle.turn.status"] == "in_flight" and agent.error is None
    assert tool.span_id == tool_span_id(call_id) and tool.parent_span_id == agent.span_id
    assert tool.error == "not that" and tool.attributes["error.type"] == "denied"
    assert [e.name for e in tool.events] == ["chronicle.approval.approvalrequested", "chronicle.approval.denied"]
    assert tool.events[1].attributes["chronicle.by"] == "ann@host"
    assert tool.attributes["gen_ai.tool.call.arguments"] == '{"command": "rm -rf x"}'
    assert "clean up" in str(agent.attributes["gen_ai.input.messages"])
    assert derive_turn_spans(log)[0].as_json() == derive_turn_spans(log)[0].as_json(), "the same log gives the same spans"
