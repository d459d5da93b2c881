"""Live events for subscribers (CLI renderers, chat, tests): one discriminated union.

Everything except the token deltas in message_update corresponds to a stored event; deltas
go to subscribers only, never one store write per token.
"""

from __future__ import annotations

import inspect
from typing import Annotated, Any, Awaitable, Callable, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter


class _Live(BaseModel):
    model_config = ConfigDict(frozen=True)
    session_id: str


class AgentStart(_Live):
    type: Literal["agent_start"] = "agent_start"
    agent: str
    #: The sub-agent's instance name (seed 004: `researcher-parsing-2`); None for one recorded before them.
    instance: str | None = None
    parent_session_id: str | None = None
    parent_tool_call_id: str | None = None
    depth: int = 0
    #: Seed 004's display prefix (AgentEventData{Prefix, Parent}): the agent's, or the default robot.
    prefix: str = "🤖"


class AgentEnd(_Live):
    type: Literal["agent_end"] = "agent_end"
    agent: str
    instance: str | None = None
    status: str
    parent_session_id: str | None = None
    parent_tool_call_id: str | None = None
    reason: str | None = None
    depth: int = 0


class TurnStart(_Live):
    type: Literal["turn_start"] = "turn_start"
    turn_id: str
    number: int
    input: str
    #: The queued input the turn answers (`submit`, a steer, a channel): a client tells its own from others'.
    input_id: str | None = None


class TurnEnd(_Live):
    type: Literal["turn_end"] = "turn_end"
    turn_id: str
    status: str
    text: str | None = None
    reason: str | None = None


class MessageStart(_Live):
    type: Literal["message_start"] = "message_start"
    turn_id: str
    step: int
    model: str = ""


class MessageUpdate(_Live):
    type: Literal["message_update"] = "message_update"
    turn_id: str
    step: int
    delta: dict[str, Any]


class MessageEnd(_Live):
    type: Literal["message_end"] = "message_end"
    turn_id: str
    step: int
    stop_reason: str
    content: list[dict[str, Any]]


class ToolStart(_Live):
    type: Literal["tool_start"] = "tool_start"
    tool_call_id: str
    tool_use_id: str
    name: str
    input: dict[str, Any]


class ToolUpdate(_Live):
    type: Literal["tool_update"] = "tool_update"
    tool_call_id: str
    status: str
    detail: str = ""


class ToolEnd(_Live):
    type: Literal["tool_end"] = "tool_end"
    tool_call_id: str
    tool_use_id: str
    name: str
    status: str
    output: str
    is_error: bool
    duration_ms: float | None = None


class StatusChange(_Live):
    type: Literal["status_change"] = "status_change"
    status: Literal["idle", "busy", "retry"]
    attempt: int | None = None
    next_attempt_at: str | None = None
    reason: str | None = None


class UsageEvent(_Live):
    type: Literal["usage"] = "usage"
    turn_id: str
    step: int
    model: str
    usage: dict[str, Any]
    usd: float | None = None


class ProgressEvent(_Live):
    """After each model call: how far the turn has come (runtime/progress.py derives it from the stored turn)."""

    type: Literal["progress"] = "progress"
    turn_id: str
    turn: int
    status: str
    iteration: int
    max_iterations: int | None = None
    input_tokens: int
    output_tokens: int
    tools_run: int
    #: Calls skipped instead of run (steering, a guard, a hook); not in tools_run.
    tools_skipped: int = 0
    elapsed_s: float | None = None


class ErrorEvent(_Live):
    type: Literal["error"] = "error"
    message: str
    turn_id: str | None = None
    kind: str = "error"


class ApprovalNeeded(_Live):
    type: Literal["approval_needed"] = "approval_needed"
    turn_id: str
    tool_call_id: str
    name: str
    input: dict[str, Any]
    reason: str = "requires approval"


class CompactionEvent(_Live):
    type: Literal["compaction"] = "compaction"
    strategy: str
    turns_compacted: int
    summary: str | None = None
    #: A compaction of the running turn's own older steps (runtime/turn_compaction.py): the turn, and
    #: how many of its first steps the summary now stands for.
    turn_id: str | None = None
    steps_compacted: int = 0


LiveEvent = Annotated[
    Union[
        AgentStart, AgentEnd, TurnStart, TurnEnd, MessageStart, MessageUpdate, MessageEnd,
        ToolStart, ToolUpdate, ToolEnd, StatusChange, UsageEvent, ErrorEvent, ApprovalNeeded,
        CompactionEvent, ProgressEvent,
    ],
    Field(discriminator="type"),
]
LIVE_EVENTS = TypeAdapter(LiveEvent)

Subscriber = Callable[[Any], Union[None, Awaitable[None]]]


class Broker:
    """Fans live events out to subscribers; a failing subscriber never breaks the loop."""

    def __init__(self) -> None:
        self._subscribers: list[Subscriber] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        self._subscribers.append(subscriber)
        return lambda: self._subscribers.remove(subscriber)

    async def emit(self, event: Any) -> None:
        for subscriber in list(self._subscribers):
            try:
                result = subscriber(event)
                if inspect.isawaitable(result):
                    await result
            except Exception:  # noqa: BLE001 - a renderer bug must not stop the agent
                pass
