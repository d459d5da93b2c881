"""Live events for subscribers (CLI renderers, chat, tests): one discriminated union.

Everything except the token deltas in message_update corresponds to a stored event; deltas
go to subscribers only, never one store write per token.
"""

from __future__ import annotations

import inspect
import logging
import traceback
from typing import Annotated, Any, Awaitable, Callable, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from .redaction import redact_secrets


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

log = logging.getLogger("chronicle")

Subscriber = Callable[[Any], Union[None, Awaitable[None]]]


def failure_line(subscriber: Any, event: Any, exc: BaseException) -> str:
    """What a subscriber's failure is said as: which callable, what it raised on which event, and where (the
    line that raised, the deepest frame of its traceback), secrets masked as in any log line."""
    target = getattr(subscriber, "callback", subscriber)
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" at {frames[-1].filename}:{frames[-1].lineno}" if frames else ""
    kind = getattr(event, "type", type(event).__name__)
    return redact_secrets(f"live-event callback {name} raised {type(exc).__name__}: {exc} on a {kind} event{where}; the "
                          "run went on (its later failures in this run are not said again)")


class Guarded:
    """A subscriber whose failure is said, not raised: the first one (`said`, with the line failure_line makes;
    default the `chronicle` logger's warning), each one's traceback at DEBUG. The turn and its log go on as if it had
    returned: a metrics callback's bug must not fail the agent's work, nor go unnoticed."""

    def __init__(self, callback: Subscriber, said: Callable[[str, BaseException], None] | None = None) -> None:
        self.callback = callback
        self.said = said or (lambda line, exc: log.warning("%s", line))
        self.failures = 0

    async def __call__(self, event: Any) -> None:
        try:
            result = self.callback(event)
            if inspect.isawaitable(result):
                await result
        except Exception as exc:  # noqa: BLE001 - said below; a callback's bug must not stop the agent
            self.failures += 1
            if log.isEnabledFor(logging.DEBUG):  # its traceback, secrets masked as in the warning
                log.debug("live-event callback %r raised on a %s event:\n%s", self.callback, getattr(event, "type", event),
                          redact_secrets("".join(traceback.format_exception(exc))).rstrip())
            if self.failures == 1:
                self.said(failure_line(self, event, exc), exc)


class Broker:
    """Fans live events out to subscribers; a failing subscriber never breaks the loop, and its failure is said
    (Guarded: the first one as a warning, each traceback at DEBUG)."""

    def __init__(self) -> None:
        self._subscribers: list[Guarded] = []

    def subscribe(self, subscriber: Subscriber) -> Callable[[], None]:
        guarded = subscriber if isinstance(subscriber, Guarded) else Guarded(subscriber)
        self._subscribers.append(guarded)
        return lambda: self._subscribers.remove(guarded)

    async def emit(self, event: Any) -> None:
        for subscriber in list(self._subscribers):
            await subscriber(event)
