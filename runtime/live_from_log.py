"""The live events of `run --json`, derived from what the log holds.

A client that follows a session from elsewhere (the HTTP server's event stream, a viewer that
reconnects) cannot rely on being subscribed while the turn ran: a worker in another process may
run it, and a reconnect must miss nothing. So the stream is derived from stored events, each
live event carrying the log position of the event it comes from (the SSE `id:`), and a
client resumes after the last position it saw. Token deltas are never stored, so a derived
stream has whole messages (`message_start` → `message_end`) but no `message_update`.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Iterable, Iterator

from chronicle.domain.agent_spec import DEFAULT_PREFIX
from chronicle.domain.stored_response import expand

from .live import (
    AgentEnd,
    AgentStart,
    ApprovalNeeded,
    CompactionEvent,
    ErrorEvent,
    MessageEnd,
    MessageStart,
    StatusChange,
    ToolEnd,
    ToolStart,
    TurnEnd,
    TurnStart,
    UsageEvent,
)
from .pricing import price

TURN_ENDS = {"Completed": "completed", "Failed": "failed", "Cancelled": "cancelled", "Stopped": "stopped",
             "Interrupted": "interrupted"}
TOOL_ENDS = {"Completed": "completed", "Failed": "failed", "Skipped": "skipped", "Cancelled": "cancelled",
             "Interrupted": "interrupted", "Denied": "denied"}


@dataclass(frozen=True)
class Positioned:
    position: int
    event: Any  # one of runtime.live's models

    def json_line(self) -> dict[str, Any]:
        return self.event.model_dump(mode="json")


class LiveFromLog:
    """Turns `log --json` entries of one session into live events, in order.

    It keeps what later events need from earlier ones (a tool call's input, its turn); feed it
    the session's whole log once, then only what is new, and it answers as a live run would."""

    def __init__(self, session_id: str, agent: str, depth: int = 0, parent_session_id: str | None = None,
                 parent_tool_call_id: str | None = None, prefix: str = "", instance: str = "") -> None:
        self.session_id = session_id
        self.agent = agent
        self.instance = instance or None
        self.prefix = prefix or DEFAULT_PREFIX
        self.depth = depth
        self.links = {"parent_session_id": parent_session_id, "parent_tool_call_id": parent_tool_call_id}
        self._calls: dict[str, dict[str, Any]] = {}

    def feed(self, entries: Iterable[dict[str, Any]]) -> Iterator[Positioned]:
        for entry in entries:
            for event in self._derive(entry):
                yield Positioned(int(entry["position"]), event)

    def _derive(self, entry: dict[str, Any]) -> list[Any]:
        kind, name, data = entry["aggregate"], entry["event"], entry.get("data") or {}
        sid = self.session_id
        if kind == "turn":
            turn_id = entry["aggregate_id"]
            if name == "Created":
                return [
                    AgentStart(session_id=sid, agent=self.agent, instance=self.instance, depth=self.depth, prefix=self.prefix, **self.links),
                    TurnStart(session_id=sid, turn_id=turn_id, number=int(data.get("number") or 0),
                              input=str(data.get("input_text") or ""), input_id=data.get("input_id")),
                    StatusChange(session_id=sid, status="busy"),
                ]
            if name == "ModelResponded":
                return self._responded(turn_id, data, entry.get("timestamp"))
            if name == "IterationsCompacted":
                return [CompactionEvent(session_id=sid, strategy=str(data.get("strategy") or ""), turns_compacted=0,
                                        summary=data.get("summary"), turn_id=turn_id,
                                        steps_compacted=int(data.get("through_step") or 0))]
            if name == "ModelCallRetried":
                return [StatusChange(session_id=sid, status="retry", attempt=data.get("attempt"),
                                     next_attempt_at=data.get("next_attempt_at"), reason=_text(data.get("error")))]
            if name in TURN_ENDS:
                status = TURN_ENDS[name]
                reason = data.get("reason") or _text(data.get("error"))
                events: list[Any] = []
                if status == "failed" and reason:
                    events.append(ErrorEvent(session_id=sid, turn_id=turn_id, message=str(reason)))
                events += [
                    TurnEnd(session_id=sid, turn_id=turn_id, status=status, text=data.get("final_text"), reason=reason),
                    StatusChange(session_id=sid, status="idle"),
                    AgentEnd(session_id=sid, agent=self.agent, instance=self.instance, status=status, reason=reason, depth=self.depth, **self.links),
                ]
                return events
            if name == "ApprovalRequested":
                return [StatusChange(session_id=sid, status="idle", reason="awaiting approval"),
                        AgentEnd(session_id=sid, agent=self.agent, instance=self.instance, status="awaiting_approval", depth=self.depth,
                                 **self.links)]
            if name == "Resumed":
                return [AgentStart(session_id=sid, agent=self.agent, instance=self.instance, depth=self.depth, prefix=self.prefix, **self.links),
                        StatusChange(session_id=sid, status="busy")]
            return []
        if kind == "tool_call":
            return self._tool(entry["aggregate_id"], name, data)
        if kind == "session" and name == "Compacted":
            return [CompactionEvent(session_id=sid, strategy=str(data.get("strategy") or ""),
                                    turns_compacted=len(data.get("turn_ids") or []), summary=data.get("summary"))]
        return []

    def _responded(self, turn_id: str, data: dict[str, Any], timestamp: str | None) -> list[Any]:
        response = expand(data.get("response") or {})
        step = int(data.get("step") or 0)
        model = str(response.get("model") or "")
        usage = response.get("usage") or {}
        at = datetime.fromisoformat(timestamp) if timestamp else None
        return [
            MessageStart(session_id=self.session_id, turn_id=turn_id, step=step, model=model),
            MessageEnd(session_id=self.session_id, turn_id=turn_id, step=step,
                       stop_reason=str(response.get("stop_reason") or ""), content=list(response.get("content") or [])),
            UsageEvent(session_id=self.session_id, turn_id=turn_id, step=step, model=model, usage=usage,
                       usd=price(model, usage, at=at) if model else None),
        ]

    def _tool(self, call_id: str, name: str, data: dict[str, Any]) -> list[Any]:
        sid = self.session_id
        if name == "Requested":
            self._calls[call_id] = {"tool_use_id": data.get("tool_use_id", ""), "name": data.get("name", ""),
                                    "input": data.get("input") or {}, "turn_id": data.get("turn_id", "")}
            return []
        call = self._calls.get(call_id, {"tool_use_id": data.get("tool_use_id", ""), "name": data.get("name", ""),
                                         "input": {}, "turn_id": ""})
        if name == "ApprovalRequested":
            return [ApprovalNeeded(session_id=sid, turn_id=call["turn_id"], tool_call_id=call_id, name=call["name"],
                                   input=call["input"], reason=str(data.get("reason") or "requires approval"))]
        if name == "Started":
            call["started"] = True
            return [ToolStart(session_id=sid, tool_call_id=call_id, tool_use_id=call["tool_use_id"], name=call["name"],
                              input=call["input"])]
        if name in TOOL_ENDS:
            # A run recorded whole (ToolCall.Completed/Failed v2 with `attempt`, no Started) started too.
            began = [ToolStart(session_id=sid, tool_call_id=call_id, tool_use_id=call["tool_use_id"], name=call["name"],
                               input=call["input"])] if data.get("attempt") and not call.get("started") else []
            output = data.get("output") if data.get("output") is not None else data.get("reason", "")
            return [*began, ToolEnd(session_id=sid, tool_call_id=call_id, tool_use_id=call["tool_use_id"], name=call["name"],
                            status=TOOL_ENDS[name], output=str(output or ""), is_error=bool(data.get("is_error", name != "Completed")),
                            duration_ms=data.get("duration_ms"))]
        return []


def _text(value: Any) -> str | None:
    if isinstance(value, dict):
        return str(value.get("message") or value)
    return None if value is None else str(value)
