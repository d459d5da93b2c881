"""The ToolCall aggregate: one tool invocation, its approval, execution and result.

Whatever state a call ends in, it answers its tool_use with exactly one tool_result:
``result_block`` is defined for every resolved state, so no tool_use is ever orphaned.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .content import ToolResultBlock
from .errors import DomainError
from .lifecycle import Edge, Lifecycle

TOOL_CALL_LIFECYCLE = Lifecycle(
    "ToolCall",
    states=[
        "pending", "awaiting_approval", "approved", "denied", "running",
        "completed", "failed", "skipped", "cancelled", "interrupted",
    ],
    initial="pending",
    edges=[
        Edge("request_approval", ("pending",), "awaiting_approval"),
        Edge("approve", ("awaiting_approval",), "approved"),
        Edge("deny", ("awaiting_approval",), "denied"),
        Edge("start", ("pending", "approved", "interrupted"), "running"),
        Edge("complete", ("running",), "completed"),
        Edge("fail", ("pending", "approved", "running"), "failed"),
        Edge("skip", ("pending", "awaiting_approval", "approved"), "skipped"),
        Edge("cancel", ("pending", "awaiting_approval", "approved", "running"), "cancelled"),
        Edge("interrupt", ("running",), "interrupted"),
    ],
    terminal={"completed", "failed", "denied", "skipped", "cancelled"},
)
RESOLVED = frozenset({"completed", "failed", "denied", "skipped", "cancelled", "interrupted"})

INTERRUPTED_NOTE = (
    "interrupted: the process running this tool stopped before it finished. It was not run "
    "again because it is not idempotent; its effects, if any, are unknown."
)


class ToolCall(Aggregate):
    class Requested(Aggregate.Created):
        session_id: UUID
        turn_id: UUID
        step: int
        tool_use_id: str
        name: str
        input: dict[str, Any]
        flags: dict[str, bool]

    @event(Requested)
    def __init__(
        self,
        id: UUID,
        session_id: UUID,
        turn_id: UUID,
        step: int,
        tool_use_id: str,
        name: str,
        input: dict[str, Any],
        flags: dict[str, bool],
        timestamp: datetime,
    ) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        self.step = step
        self.tool_use_id = tool_use_id
        self.name = name
        self.input = input
        self.flags = flags
        self.status = "pending"
        self.output: str | None = None
        self.is_error = False
        self.reason: str | None = None
        self.duration_ms: float | None = None
        self.effects: list[dict[str, Any]] = []
        self.attempts = 0
        self.ends_turn = False
        self.blocks: list[dict[str, Any]] | None = None

    def _next(self, trigger: str) -> str:
        return TOOL_CALL_LIFECYCLE.next_state(trigger, self.status, self.id)

    @property
    def resolved(self) -> bool:
        return self.status in RESOLVED

    @property
    def idempotent(self) -> bool:
        return bool(self.flags.get("idempotent") or self.flags.get("read_only"))

    # -- approval ------------------------------------------------------------------------------

    def request_approval(self, now: datetime) -> None:
        self._next("request_approval")
        self._approval_requested(timestamp=now)

    @event("ApprovalRequested")
    def _approval_requested(self, timestamp: datetime) -> None:
        self.status = "awaiting_approval"

    def approve(self, now: datetime, by: str = "user", always: bool = False, actor: str | None = None) -> None:
        """`by` is the mechanism (user, --yes, always, policy); `actor` is who: a person or an API caller."""
        self._next("approve")
        self._approved(by=by, always=always, actor=actor, timestamp=now)

    class Approved(Aggregate.Event):
        """v2 added `actor`: who decided (user@host from the CLI, the caller's identity from the API); None before."""

        class_version = 2
        by: str
        always: bool
        actor: str | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["actor"] = None

    @event(Approved)
    def _approved(self, by: str, always: bool, actor: str | None, timestamp: datetime) -> None:
        self.status = "approved"

    def deny(self, now: datetime, reason: str = "denied by the user", by: str = "user", actor: str | None = None) -> None:
        self._next("deny")
        self._denied(reason=reason, by=by, actor=actor, timestamp=now)

    class Denied(Aggregate.Event):
        """v2 added `actor`: who decided (user@host from the CLI, the caller's identity from the API); None before."""

        class_version = 2
        reason: str
        by: str
        actor: str | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["actor"] = None

    @event(Denied)
    def _denied(self, reason: str, by: str, actor: str | None, timestamp: datetime) -> None:
        self.status = "denied"
        self.reason = reason

    # -- execution -----------------------------------------------------------------------------

    def start(self, now: datetime) -> None:
        self._next("start")
        if self.status == "interrupted" and not self.idempotent:
            raise DomainError(f"tool call {self.id} ({self.name}) is not idempotent; it is never run twice")
        self._started(attempt=self.attempts + 1, timestamp=now)

    @event("Started")
    def _started(self, attempt: int, timestamp: datetime) -> None:
        self.status = "running"
        self.attempts = attempt

    def complete(
        self, output: str, now: datetime, is_error: bool = False, duration_ms: float = 0.0,
        effects: list[dict[str, Any]] | None = None, ends_turn: bool = False, blocks: list[dict[str, Any]] | None = None,
    ) -> None:
        """`ends_turn` records that this result finishes the turn (task_complete), so resume sees it;
        `blocks` keeps a result richer than text (an MCP tool's images, structured content) whole."""
        self._next("complete")
        extra: dict[str, Any] = {"blocks": blocks} if blocks else {}
        self._completed(
            output=output, is_error=is_error, duration_ms=duration_ms, effects=effects or [], timestamp=now,
            ends_turn=ends_turn and not is_error, **extra,
        )

    @event("Completed")
    def _completed(
        self, output: str, is_error: bool, duration_ms: float, effects: list[dict[str, Any]], timestamp: datetime,
        ends_turn: bool = False,  # absent from events recorded before sub-agents: the default replays them
        blocks: list[dict[str, Any]] | None = None,  # absent before MCP tools, and for plain-text results
    ) -> None:
        self.status = "completed"
        self.output = output
        self.is_error = is_error
        self.duration_ms = duration_ms
        self.effects = effects
        self.ends_turn = ends_turn
        self.blocks = blocks

    def fail(self, error: str, now: datetime, duration_ms: float = 0.0) -> None:
        self._next("fail")
        self._failed(error=error, duration_ms=duration_ms, timestamp=now)

    @event("Failed")
    def _failed(self, error: str, duration_ms: float, timestamp: datetime) -> None:
        self.status = "failed"
        self.output = error
        self.is_error = True
        self.duration_ms = duration_ms

    def skip(self, reason: str, now: datetime) -> None:
        self._next("skip")
        self._skipped(reason=reason, timestamp=now)

    @event("Skipped")
    def _skipped(self, reason: str, timestamp: datetime) -> None:
        self.status = "skipped"
        self.reason = reason

    def cancel(self, reason: str, now: datetime) -> None:
        self._next("cancel")
        self._cancelled(reason=reason, timestamp=now)

    @event("Cancelled")
    def _cancelled(self, reason: str, timestamp: datetime) -> None:
        self.status = "cancelled"
        self.reason = reason

    def interrupt(self, reason: str, now: datetime) -> None:
        self._next("interrupt")
        self._interrupted(reason=reason, timestamp=now)

    @event("Interrupted")
    def _interrupted(self, reason: str, timestamp: datetime) -> None:
        self.status = "interrupted"
        self.reason = reason

    # -- what the model reads ------------------------------------------------------------------

    def result_block(self) -> ToolResultBlock:
        if self.status == "completed":
            return ToolResultBlock(tool_use_id=self.tool_use_id, content=self.output or "", is_error=self.is_error)
        if self.status == "failed":
            return ToolResultBlock(tool_use_id=self.tool_use_id, content=self.output or "error", is_error=True)
        if self.status == "interrupted":
            return ToolResultBlock(tool_use_id=self.tool_use_id, content=INTERRUPTED_NOTE, is_error=True)
        if self.status in ("denied", "skipped", "cancelled"):
            return ToolResultBlock(tool_use_id=self.tool_use_id, content=f"{self.status}: {self.reason}", is_error=True)
        raise DomainError(f"tool call {self.id} ({self.name}) is {self.status}; it has no result yet")
