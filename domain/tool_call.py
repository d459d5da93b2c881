"""The ToolCall aggregate: one tool invocation, its approval, execution and result.

Whatever state a call ends in, it answers its tool_use with exactly one tool_result:
``result_block`` is defined for every resolved state, so no tool_use is ever orphaned.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .decided import Decided
from .errors import DomainError
from .event_type import EventType
from .lifecycle import Edge, Lifecycle

if TYPE_CHECKING:  # imported where it is used: replaying a tool call builds no pydantic model
    from .content import ToolResultBlock

    # The payload shapes type the event fields for mypy and runtime/vocabulary.py; decoding needs none.
    from .payloads import ContentBlock, JSONObject, ToolEffect, ToolFlags

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
        # From pending, approved or interrupted: a call that may run again (read-only, idempotent)
        # records no Started; its run is recorded whole by Completed or Failed (see `ran`).
        Edge("complete", ("pending", "approved", "interrupted", "running"), "completed"),
        Edge("fail", ("pending", "approved", "interrupted", "running"), "failed"),
        Edge("skip", ("pending", "awaiting_approval", "approved"), "skipped"),
        Edge("cancel", ("pending", "awaiting_approval", "approved", "running"), "cancelled"),
        Edge("interrupt", ("running",), "interrupted"),
    ],
    terminal={"completed", "failed", "denied", "skipped", "cancelled"},
)
RESOLVED = frozenset({"completed", "failed", "denied", "skipped", "cancelled", "interrupted"})
#: How a call ends while its function runs on: cancelled, or failed by its timeout (`record_late_end`).
LEFT_RUNNING_ENDS = frozenset({"cancelled", "failed"})

INTERRUPTED_NOTE = (
    "interrupted: the process running this tool stopped before it finished. It was not run "
    "again because it is not idempotent; its effects, if any, are unknown."
)


class ToolCall(Aggregate):
    #: Declared, not left to eventsourcing to make: an event class written as a subclass of it is
    #: used as it is, where one written on `Aggregate.Event` is built again as a subclass of this,
    #: and EventType makes it without compiling code (domain/event_type.py).
    class Event(Aggregate.Event, metaclass=EventType):
        pass

    class Requested(Aggregate.Created, Event):
        session_id: UUID
        turn_id: UUID
        step: int
        tool_use_id: str
        name: str
        input: JSONObject
        flags: ToolFlags

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
        #: Why a hook asked for this call's approval (the doom loop, the user's hook), as recorded; None when
        #: the tool or the policy requires it. Such a question is a person's to answer in every process.
        self.asked_by_hook: str | None = None
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

    # -- secrets cut out before recording -----------------------------------------------------

    def note_redactions(self, where: str, counts: dict[str, int], now: datetime) -> None:
        """How many secrets of each kind were cut out of this call's input, output or denial reason (`where`) before it was recorded."""
        if counts:
            self._secrets_redacted(where=where, counts=dict(counts), timestamp=now)

    class SecretsRedacted(Event):
        where: str
        counts: dict[str, int]

    @event(SecretsRedacted)
    def _secrets_redacted(self, where: str, counts: dict[str, int], timestamp: datetime) -> None:
        """Nothing changes: the count is the fact, for the audit (the text was redacted before it was recorded)."""

    # -- approval ------------------------------------------------------------------------------

    def request_approval(self, now: datetime, reason: str | None = None) -> None:
        """`reason`: why a hook (a guard, the user's) asked, though the tool does not require approval; None when it does."""
        self._next("request_approval")
        self._approval_requested(reason=reason, timestamp=now)

    class ApprovalRequested(Event):
        """v2: `reason`, set when a hook asked for the approval (doom loop, the user's hook); None otherwise."""

        class_version = 2
        reason: str | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["reason"] = None

    @event(ApprovalRequested)
    def _approval_requested(self, reason: str | None, timestamp: datetime) -> None:
        self.status = "awaiting_approval"
        self.asked_by_hook = reason

    def approve(self, now: datetime, by: str = "user", always: bool = False, actor: str | None = None,
                reason: str | None = None) -> None:
        """`by` is the mechanism (user, --yes, always, policy); `actor` is who: a person or an API caller;
        `reason` why a mechanism approved (the policy and where it was set); None for a person's answer."""
        self._next("approve")
        self._approved(by=by, always=always, actor=actor, reason=reason, timestamp=now)

    class Approved(Decided, Event):
        """v3: `reason`, why the approval was given when no person gave it (the approval policy); None before."""

        class_version = 3
        by: str
        always: bool
        reason: str | None

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            state["reason"] = None

    @event(Approved)
    def _approved(self, by: str, always: bool, actor: str | None, reason: str | None, timestamp: datetime) -> None:
        self.status = "approved"

    def deny(self, now: datetime, reason: str = "denied by the user", by: str = "user", actor: str | None = None) -> None:
        self._next("deny")
        self._denied(reason=reason, by=by, actor=actor, timestamp=now)

    class Denied(Decided, Event):
        reason: str
        by: str

    @event(Denied)
    def _denied(self, reason: str, by: str, actor: str | None, timestamp: datetime) -> None:
        self.status = "denied"
        self.reason = reason

    # -- execution -----------------------------------------------------------------------------

    def start(self, now: datetime) -> None:
        self._next("start")
        self._not_again()
        self._started(attempt=self.attempts + 1, timestamp=now)

    def _not_again(self) -> None:
        """A call found interrupted runs again only if running it twice is harmless."""
        if self.status == "interrupted" and not self.idempotent:
            raise DomainError(f"tool call {self.id} ({self.name}) is not idempotent; it is never run twice")

    class Started(Event):
        attempt: int

    @event(Started)
    def _started(self, attempt: int, timestamp: datetime) -> None:
        self.status = "running"
        self.attempts = attempt

    def complete(
        self, output: str, now: datetime, is_error: bool = False, duration_ms: float = 0.0,
        effects: list[dict[str, Any]] | None = None, ends_turn: bool = False, blocks: list[dict[str, Any]] | None = None,
    ) -> None:
        """`ends_turn` records that this result finishes the turn (task_complete), so resume sees it;
        `blocks` keeps a result richer than text (an MCP tool's images, structured content) whole.
        Completing a call that was not started records its run: the attempt is counted here."""
        self._next("complete")
        self._not_again()
        self._completed(
            output=None, is_error=is_error, duration_ms=duration_ms, effects=effects or None,
            ends_turn=ends_turn and not is_error, blocks=blocks or None,
            attempt=None if self.status == "running" else self.attempts + 1, timestamp=now,
        )
        # Stored once, by the turn (Turn.keep_results / close_step, in the same save); held here for
        # the rest of this run: the step's results and the after_tool_call hooks read it.
        self.output = output

    class Completed(Event):
        """v2: `attempt` is set when the call ran without a recorded Started (a call that may run
        again commits its whole run in this one event; it started at timestamp - duration_ms), None
        after a Started; `effects` is None rather than [] when the call changed nothing; `ends_turn`
        and `blocks`, once optional arguments, are always there.

        v3: `output` is None: the output is stored once, in the turn's result for the call
        (Turn.ToolResultsKept or ToolResultsRecorded, saved with this event). Older events keep
        theirs, which is how an old store's step still open on a completed call gets its result."""

        class_version = 3
        output: str | None
        is_error: bool
        duration_ms: float
        effects: list[ToolEffect] | None
        ends_turn: bool
        blocks: list[ContentBlock] | None
        attempt: int | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["effects"] = state.get("effects") or None
            state.setdefault("ends_turn", False)
            state.setdefault("blocks", None)
            state["attempt"] = None

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            """Nothing to change: a v2 event's output is a v3 event's output given on the call."""

    @event(Completed)
    def _completed(
        self, output: str | None, is_error: bool, duration_ms: float, effects: list[dict[str, Any]] | None, ends_turn: bool,
        blocks: list[dict[str, Any]] | None, attempt: int | None, timestamp: datetime,
    ) -> None:
        if attempt is not None:
            self.attempts = attempt
        self.status = "completed"
        self.output = output
        self.is_error = is_error
        self.duration_ms = duration_ms
        self.effects = effects or []
        self.ends_turn = ends_turn
        self.blocks = blocks

    def record_effects(self, effects: list[dict[str, Any]], now: datetime) -> None:
        """What the running call did before it failed (spawn_batch's subtasks), so a failure keeps it: a
        completed call carries its effects on its Completed event instead. A call that may run again
        records no Started (its run is one event), so it may still be pending or approved here."""
        if not effects:
            return
        if self.status not in ("running", "pending", "approved", "interrupted"):
            raise DomainError(f"tool call {self.id} is {self.status}; effects are recorded while it runs")
        self._effects_recorded(effects=list(effects), timestamp=now)

    class EffectsRecorded(Event):
        effects: list[ToolEffect]

    @event(EffectsRecorded)
    def _effects_recorded(self, effects: list[dict[str, Any]], timestamp: datetime) -> None:
        self.effects = [*self.effects, *effects]

    def fail(self, error: str, now: datetime, duration_ms: float = 0.0, ran: bool = False) -> None:
        """`ran`: the tool ran (and failed, or timed out) without a recorded Started; its attempt is
        counted here. A call failed before running (unknown tool, invalid input) keeps 0 attempts."""
        self._next("fail")
        if ran:
            self._not_again()
        attempt = self.attempts + 1 if ran and self.status != "running" else None
        self._failed(error=error, duration_ms=duration_ms, attempt=attempt, timestamp=now)

    class Failed(Event):
        """v2: `attempt`, set when the failed run was recorded by this event alone (no Started)."""

        class_version = 2
        error: str
        duration_ms: float
        attempt: int | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            state["attempt"] = None

    @event(Failed)
    def _failed(self, error: str, duration_ms: float, attempt: int | None, timestamp: datetime) -> None:
        if attempt is not None:
            self.attempts = attempt
        self.status = "failed"
        self.output = error
        self.is_error = True
        self.duration_ms = duration_ms

    def skip(self, reason: str, now: datetime) -> None:
        self._next("skip")
        self._skipped(reason=reason, timestamp=now)

    class Skipped(Event):
        reason: str

    @event(Skipped)
    def _skipped(self, reason: str, timestamp: datetime) -> None:
        self.status = "skipped"
        self.reason = reason

    def cancel(self, reason: str, now: datetime) -> None:
        self._next("cancel")
        self._cancelled(reason=reason, timestamp=now)

    class Cancelled(Event):
        reason: str

    @event(Cancelled)
    def _cancelled(self, reason: str, timestamp: datetime) -> None:
        self.status = "cancelled"
        self.reason = reason

    def record_late_end(self, raised: bool, output: str, duration_ms: float, now: datetime) -> None:
        """A sync Python function that a cancel or a timeout left running (a thread cannot be stopped)
        finished after all: whether it raised, what it returned (secrets cut out, trimmed) and how long
        it ran. The call stays as it ended (cancelled or failed; the model read that result), and this
        records that the function's effects may well have happened."""
        if self.status not in LEFT_RUNNING_ENDS:
            raise DomainError(f"tool call {self.id} ({self.name}) is {self.status}; only a call that ended while "
                              "its function ran on (cancelled, failed) records the function's late end")
        self._finished_after_abandon(raised=raised, output=output, duration_ms=duration_ms, timestamp=now)

    class FinishedAfterAbandon(Event):
        """The function of a call already cancelled or timed out ran to its end (or raised) later."""

        raised: bool
        output: str
        duration_ms: float

    @event(FinishedAfterAbandon)
    def _finished_after_abandon(self, raised: bool, output: str, duration_ms: float, timestamp: datetime) -> None:
        """Nothing changes: the call's result was given to the model when it ended; this is the fact for the audit."""

    def interrupt(self, reason: str, now: datetime) -> None:
        self._next("interrupt")
        self._interrupted(reason=reason, timestamp=now)

    class Interrupted(Event):
        reason: str

    @event(Interrupted)
    def _interrupted(self, reason: str, timestamp: datetime) -> None:
        self.status = "interrupted"
        self.reason = reason

    # -- what the model reads ------------------------------------------------------------------

    def result_block(self) -> ToolResultBlock:
        from .content import ToolResultBlock

        content, is_error = self.result()
        return ToolResultBlock(tool_use_id=self.tool_use_id, content=content, is_error=is_error)

    def result(self) -> tuple[str, bool]:
        """The result's content and whether it is an error, as `result_block` gives them to the model:
        `log` shows them without building a block (a pydantic model it would otherwise never need)."""
        if self.status == "completed":
            if self.output is None:
                raise DomainError(f"tool call {self.id} ({self.name}) was loaded from the store: its output is kept by "
                                  f"turn {self.turn_id} (Turn.result_for)")
            return self.output, self.is_error
        if self.status == "failed":
            return self.output or "error", True
        if self.status == "interrupted":
            return INTERRUPTED_NOTE, True
        if self.status in ("denied", "skipped", "cancelled"):
            return f"{self.status}: {self.reason}", True
        raise DomainError(f"tool call {self.id} ({self.name}) is {self.status}; it has no result yet")
