"""The Turn aggregate: one input through to the final answer.

A turn is a list of steps; a step is one model response, verbatim, followed by the
tool_result blocks exactly as the model will read them. Recording the results on the turn
(the ToolCall aggregates keep the full lifecycle) lets the context be rebuilt from turns alone,
and the turn is the only place a completed tool's output is stored (ToolCall.Completed v3).
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Sequence
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .decided import Decided
from .errors import DomainError
from .event_type import EventType
from .stored_response import compact
from .turn_lifecycle import TURN_LIFECYCLE as TURN_LIFECYCLE  # ops/diagrams.py and tests import it from here
from .turn_steps import StepsView, closing_blocks, resolve_kept, step_entry
from .turn_upcasts import (
    error_from_reason,
    responded_v1_v2,
    responded_v2_v3,
    retried_v1_v2,
    snapshot_v1_v2,
    snapshot_v2_v3,
    snapshot_v3_v4,
)

if TYPE_CHECKING:  # the content models (pydantic) are imported where they are used: replaying a turn builds none
    from .content import ModelResponse, ToolResultBlock

    # The payload shapes type the event fields for mypy and runtime/vocabulary.py; decoding needs none.
    from .payloads import ContentBlock, GuardrailMark, MiddlewareMark, RequestDelta, RetryError, StoredResponse, TurnError, Usage
    from .tool_call import ToolCall


class Turn(StepsView, Aggregate):
    #: Declared, not left to eventsourcing to make: an event class written as a subclass of it is
    #: used as it is, where one written on `Aggregate.Event` is built again as a subclass of this,
    #: and EventType makes it without compiling code (domain/event_type.py).
    class Event(Aggregate.Event, metaclass=EventType):
        pass

    #: What each version added, and how an older snapshot is read: turn_upcasts.snapshot_vN_vN+1.
    class_version = 4

    upcast_v1_v2 = staticmethod(snapshot_v1_v2)
    upcast_v2_v3 = staticmethod(snapshot_v2_v3)
    upcast_v3_v4 = staticmethod(snapshot_v3_v4)

    class Created(Aggregate.Created, Event):
        session_id: UUID
        input_id: str
        number: int
        input_text: str
        agent: str

    @event(Created)
    def __init__(
        self, id: UUID, session_id: UUID, input_id: str, number: int, input_text: str, agent: str, timestamp: datetime
    ) -> None:
        self.session_id = session_id
        self.input_id = input_id
        self.number = number
        self.input_text = input_text
        self.agent = agent
        self.status = "pending"
        self.steps: list[dict[str, Any]] = []
        self.retries: list[dict[str, Any]] = []
        self.final_text: str | None = None
        self.reason: str | None = None
        self.error: dict[str, Any] | None = None
        self.awaiting: list[UUID] = []
        self.started_at = timestamp
        self.ended_at: datetime | None = None

    #: Reference blocks of the images and documents sent with the input (domain/attachment.py);
    #: a class default, so turns and snapshots from before attachments existed have none.
    attachments: tuple[dict[str, Any], ...] | list[dict[str, Any]] = ()

    def reference_attachments(self, blocks: list[dict[str, Any]], now: datetime) -> None:
        """Record the input's attachments on the turn, before it starts; its first message carries them."""
        if self.status != "pending":
            raise DomainError(f"turn {self.id} is {self.status}; attachments come with its input, before it starts")
        self._attachments_referenced(blocks=list(blocks), timestamp=now)

    class AttachmentsReferenced(Event):
        blocks: list[ContentBlock]

    @event(AttachmentsReferenced)
    def _attachments_referenced(self, blocks: list[dict[str, Any]], timestamp: datetime) -> None:
        self.attachments = blocks

    def _next(self, trigger: str) -> str:
        return TURN_LIFECYCLE.next_state(trigger, self.status, self.id)

    @property
    def finished(self) -> bool:
        return self.status in TURN_LIFECYCLE.terminal

    # -- lifecycle -----------------------------------------------------------------------------

    def start(self, now: datetime) -> None:
        self._next("start")
        self._started(timestamp=now)

    class Started(Event):
        pass

    @event(Started)
    def _started(self, timestamp: datetime) -> None:
        self.status = "running"

    def await_approval(self, tool_call_ids: list[UUID], now: datetime) -> None:
        self._next("await_approval")
        if not tool_call_ids:
            raise DomainError("awaiting approval needs at least one tool call")
        self._approval_requested(tool_call_ids=tool_call_ids, timestamp=now)

    class ApprovalRequested(Event):
        tool_call_ids: list[UUID]

    @event(ApprovalRequested)
    def _approval_requested(self, tool_call_ids: list[UUID], timestamp: datetime) -> None:
        self.status = "awaiting_approval"
        self.awaiting = list(tool_call_ids)

    def resume(self, reason: str, now: datetime, actor: str | None = None) -> None:
        self._next("resume")
        self._resumed(reason=reason, actor=actor, timestamp=now)

    class Resumed(Decided, Event):
        reason: str

    @event(Resumed)
    def _resumed(self, reason: str, actor: str | None, timestamp: datetime) -> None:
        self.status = "running"
        self.awaiting = []

    def complete(self, now: datetime) -> None:
        self._next("complete")
        if self.open_step is not None:
            raise DomainError(f"turn {self.id} cannot complete: step {self.open_step['step']} has unanswered tool calls")
        last = self.last_response
        final_text = self.answer if self.answer is not None else (last.text if last else "")
        self._completed(final_text=final_text, timestamp=now)

    class Completed(Event):
        final_text: str

    @event(Completed)
    def _completed(self, final_text: str, timestamp: datetime) -> None:
        self.status = "completed"
        self.final_text = final_text
        self.ended_at = timestamp

    def fail(self, reason: str, now: datetime, error: dict[str, Any] | None = None) -> None:
        self._next("fail")
        self._failed(reason=reason, error=error, timestamp=now)

    class Failed(Event):
        reason: str
        error: TurnError | None

    @event(Failed)
    def _failed(self, reason: str, error: dict[str, Any] | None, timestamp: datetime) -> None:
        self.status = "failed"
        self.reason = reason
        self.error = error
        self.ended_at = timestamp

    def cancel(self, reason: str, now: datetime, actor: str | None = None) -> None:
        self._next("cancel")
        self._cancelled(reason=reason, actor=actor, timestamp=now)

    class Cancelled(Decided, Event):
        reason: str

    @event(Cancelled)
    def _cancelled(self, reason: str, actor: str | None, timestamp: datetime) -> None:
        self.status = "cancelled"
        self.reason = reason
        self.ended_at = timestamp

    def stop(self, guard: str, reason: str, now: datetime) -> None:
        """A guard (budget, rate, doom loop, tool-call limit) ended the turn."""
        self._next("stop")
        self._stopped(guard=guard, reason=reason, timestamp=now)

    class Stopped(Event):
        guard: str
        reason: str

    @event(Stopped)
    def _stopped(self, guard: str, reason: str, timestamp: datetime) -> None:
        self.status = "stopped"
        self.reason = reason
        self.error = {"kind": "guard", "guard": guard}
        self.ended_at = timestamp

    def interrupt(self, reason: str, now: datetime) -> None:
        self._next("interrupt")
        self._interrupted(reason=reason, timestamp=now)

    class Interrupted(Event):
        reason: str

    @event(Interrupted)
    def _interrupted(self, reason: str, timestamp: datetime) -> None:
        self.status = "interrupted"
        self.reason = reason

    # -- model calls and tool results ----------------------------------------------------------

    def record_response(
        self,
        response: ModelResponse,
        now: datetime,
        fingerprint: str = "",
        request_delta: dict[str, Any] | None = None,
        latency_ms: float = 0.0,
        attempts: int = 1,
    ) -> int:
        if self.status != "running":
            raise DomainError(f"turn {self.id} is {self.status}; a model response can only be recorded while running")
        if self.open_step is not None:
            raise DomainError(f"turn {self.id}: step {self.open_step['step']} still waits for tool results")
        step = len(self.steps)
        self._model_responded(
            step=step,
            response=compact(response.model_dump(mode="json")),
            fingerprint=fingerprint,
            request_delta=request_delta or {},
            latency_ms=latency_ms,
            attempts=attempts,
            timestamp=now,
        )
        return step

    class ModelResponded(Event):
        """v2: the response records every block and usage field the API sent, and `stop_details`
        (a refusal's category and explanation); a v1 response gets `stop_details: None`. Blocks and
        usage needed no change of shape: a v1 record is a valid v2 record without the new fields.

        v3: the response is stored compact (defaults left out, domain/stored_response.py) and
        `request_delta` holds only what is read: the model and max_tokens asked for, and the
        message count that rebuilds the request; the system and tool hashes and the count of new
        messages, never read, are gone (the fingerprint already covers system prompt and tools)."""

        class_version = 3
        step: int
        response: StoredResponse
        fingerprint: str
        request_delta: RequestDelta
        latency_ms: float
        attempts: int

        upcast_v1_v2 = staticmethod(responded_v1_v2)
        upcast_v2_v3 = staticmethod(responded_v2_v3)

    @event(ModelResponded)
    def _model_responded(
        self,
        step: int,
        response: dict[str, Any],
        fingerprint: str,
        request_delta: dict[str, Any],
        latency_ms: float,
        attempts: int,
        timestamp: datetime,
    ) -> None:
        self.steps.append(step_entry(step, response, fingerprint, request_delta, timestamp))

    def record_retry(self, attempt: int, reason: str, delay_s: float, now: datetime, error: dict[str, Any] | None = None) -> None:
        if self.status != "running":
            raise DomainError(f"turn {self.id} is {self.status}; retries are recorded while running")
        self._model_call_retried(
            step=len(self.steps), attempt=attempt, reason=reason, delay_s=delay_s,
            error=dict(error) if error else error_from_reason(reason), timestamp=now,
        )

    class ModelCallRetried(Event):
        """v2 added `error`: the provider's error as data (kind, message, status, retry_after_s)."""

        class_version = 2
        step: int
        attempt: int
        reason: str
        delay_s: float
        error: RetryError

        upcast_v1_v2 = staticmethod(retried_v1_v2)

    @event(ModelCallRetried)
    def _model_call_retried(
        self, step: int, attempt: int, reason: str, delay_s: float, error: dict[str, Any], timestamp: datetime
    ) -> None:
        self.retries.append({"step": step, "attempt": attempt, "reason": reason, "delay_s": delay_s, "error": error})

    def keep_results(self, calls: Sequence[ToolCall], now: datetime) -> None:
        """Record the results of calls that completed and are saved before their step closes.

        The turn is where a completed tool's output is stored (ToolCall.Completed v3 carries
        none), so a call saved on its own -- one that must not run twice commits its end at once,
        an approval wait saves what already ran -- has its result kept here, in the same save.
        The step's closing event then refers to it instead of repeating it."""
        step = self.open_step
        if step is None:
            raise DomainError(f"turn {self.id} has no step waiting for tool results")
        kept = step.get("kept") or {}
        fresh = [c for c in calls if c.status == "completed" and c.step == step["step"] and c.tool_use_id not in kept]
        if fresh:
            self._tool_results_kept(step=step["step"], blocks=[c.result_block().model_dump(mode="json") for c in fresh], timestamp=now)

    class ToolResultsKept(Event):
        """Results of completed calls, recorded when the calls were saved before their step closed."""

        step: int
        blocks: list[ContentBlock]

    @event(ToolResultsKept)
    def _tool_results_kept(self, step: int, blocks: list[dict[str, Any]], timestamp: datetime) -> None:
        kept = self.steps[step].setdefault("kept", {})
        for block in blocks:
            kept[block["tool_use_id"]] = block

    def close_step(self, calls: Sequence[ToolCall], now: datetime, extra: Sequence[Any] = ()) -> None:
        """Close the open step with the calls' results, in the model's order; a result kept earlier
        is referred to, not repeated. A completed call loaded from the store has no output of its
        own (v3): its result is the one this turn kept."""
        self.record_tool_results([self.result_of(c) for c in calls], now, extra)

    def record_tool_results(self, results: list[ToolResultBlock], now: datetime, extra: Sequence[Any] = ()) -> None:
        """Close the open step with exactly one result per tool_use, in the model's order.

        ``extra`` blocks (steering text) follow the results in the same user message. A result
        kept earlier (`keep_results`) is stored as a reference to it (`kept_ref`).
        """
        from .content import dump_blocks

        step = self.open_step
        if step is None:
            raise DomainError(f"turn {self.id} has no step waiting for tool results")
        blocks = closing_blocks(f"turn {self.id}", step, results)
        self._tool_results_recorded(step=step["step"], blocks=blocks + dump_blocks(list(extra)), timestamp=now)

    class ToolResultsRecorded(Event):
        """A block that is a `kept_ref` stands for the result recorded by an earlier ToolResultsKept."""

        step: int
        blocks: list[ContentBlock]

    @event(ToolResultsRecorded)
    def _tool_results_recorded(self, step: int, blocks: list[dict[str, Any]], timestamp: datetime) -> None:
        kept = self.steps[step].pop("kept", None) or {}
        self.steps[step]["results"] = resolve_kept(blocks, kept)

    # -- guardrails that changed what passes (runtime/guardrails.py) --------------------------------

    #: The input as the model reads it when an inbound check changed it, and the final answer as
    #: delivered when a final check changed it; None = unchanged. Class defaults, so turns and
    #: snapshots from before guardrails could modify have neither.
    model_input: str | None = None
    answer: str | None = None
    #: One entry per check that changed a text or failed open: name, where, action, digests.
    guardrails_applied: tuple[dict[str, Any], ...] | list[dict[str, Any]] = ()

    def record_guardrail(self, mark: dict[str, Any], text: str | None, now: datetime) -> None:
        """A check at `inbound` or `final` changed the text (`text` is the new one) or failed open (`text` None).

        The input and the model's response stay recorded verbatim; the new text is what the model
        reads as the input from now on, or what the turn delivers as its answer.
        """
        if self.finished:
            raise DomainError(f"turn {self.id} is {self.status}; guardrails act before it ends")
        where = mark.get("where")
        if where not in ("inbound", "final"):
            raise DomainError(f"a guardrail on the turn acts on its inbound message or final answer, not {where!r}")
        if where == "inbound" and self.steps:
            raise DomainError(f"turn {self.id}: inbound checks run before the first model call")
        self._guardrail_applied(mark=dict(mark), text=text, timestamp=now)

    class GuardrailApplied(Event):
        mark: GuardrailMark
        text: str | None

    @event(GuardrailApplied)
    def _guardrail_applied(self, mark: dict[str, Any], text: str | None, timestamp: datetime) -> None:
        self.guardrails_applied = [*self.guardrails_applied, mark]
        if text is not None:
            if mark["where"] == "inbound":
                self.model_input = text
            else:
                self.answer = text

    @property
    def inbound_checked(self) -> bool:
        """Did the inbound checks already leave a mark (so a resumed turn does not apply them twice)?"""
        return any(m.get("where") == "inbound" for m in self.guardrails_applied)

    # -- middleware decisions (runtime/middleware.py) ----------------------------------------------

    #: One entry per decision a middleware recorded around a run: middleware, action, details.
    middleware_applied: tuple[dict[str, Any], ...] | list[dict[str, Any]] = ()

    def record_middleware(self, mark: dict[str, Any], now: datetime) -> None:
        """A middleware around a run of this turn recorded a decision. Allowed after the turn ended too:
        a middleware acts after the run as well as before it, and what it decides must not be a gap."""
        if not isinstance(mark.get("middleware"), str) or not isinstance(mark.get("action"), str):
            raise DomainError("a middleware decision names its middleware and action")
        self._middleware_applied(mark=dict(mark), timestamp=now)

    class MiddlewareApplied(Event):
        mark: MiddlewareMark

    @event(MiddlewareApplied)
    def _middleware_applied(self, mark: dict[str, Any], timestamp: datetime) -> None:
        self.middleware_applied = [*self.middleware_applied, mark]

    # -- secrets cut out before recording -----------------------------------------------------

    def note_redactions(self, where: str, counts: dict[str, int], now: datetime) -> None:
        """How many secrets of each kind were cut out of a model response (`where`: "response step N") before it was recorded."""
        if counts:
            self._secrets_redacted(where=where, counts=dict(counts), timestamp=now)

    class SecretsRedacted(Event):
        where: str
        counts: dict[str, int]

    @event(SecretsRedacted)
    def _secrets_redacted(self, where: str, counts: dict[str, int], timestamp: datetime) -> None:
        """Nothing changes: the count is the fact, for the audit (the text was redacted before it was recorded)."""

    # -- compaction inside the turn (runtime/turn_compaction.py) ---------------------------------

    #: Each time the turn's older steps were replaced in the model's context (the steps stay recorded):
    #: through_step (steps before it are replaced), steps_recorded (how many steps the turn had then),
    #: summary (None: left out without one), strategy. A class default: older turns have none.
    iteration_compactions: tuple[dict[str, Any], ...] | list[dict[str, Any]] = ()
    #: Summaries of the turn's steps tried, failed ones included (numbers the next summary call).
    iteration_compaction_attempts: int = 0

    def compact_iterations(
        self, through_step: int, summary: str | None, strategy: str, now: datetime,
        usage: dict[str, Any] | None = None, model: str = "",
    ) -> None:
        """Replace steps [0, through_step) in what the model reads by `summary`. Whole steps only, so a
        tool_use and its tool_result are replaced or kept together; the last step is always kept."""
        if self.status != "running" or self.open_step is not None:
            raise DomainError(f"turn {self.id}: its steps are compacted between model calls of a running turn")
        done = self.iteration_compactions[-1]["through_step"] if self.iteration_compactions else 0
        if not done < through_step < len(self.steps):
            raise DomainError(f"turn {self.id}: compaction must cover more than steps [0, {done}) and keep the last step")
        self._iterations_compacted(
            through_step=through_step, steps_recorded=len(self.steps), summary=summary, strategy=strategy,
            usage=usage or {}, model=model, timestamp=now,
        )

    class IterationsCompacted(Event):
        through_step: int
        steps_recorded: int
        summary: str | None
        strategy: str
        usage: Usage
        model: str

    @event(IterationsCompacted)
    def _iterations_compacted(
        self, through_step: int, steps_recorded: int, summary: str | None, strategy: str, usage: dict[str, Any], model: str,
        timestamp: datetime,
    ) -> None:
        entry = {"through_step": through_step, "steps_recorded": steps_recorded, "summary": summary, "strategy": strategy}
        self.iteration_compactions = [*self.iteration_compactions, entry]
        self.iteration_compaction_attempts += 1

    def record_iteration_compaction_failure(
        self, reason: str, strategy: str, now: datetime, usage: dict[str, Any] | None = None, model: str = ""
    ) -> None:
        """A summary of the turn's steps that failed changes nothing the model reads; it is a recorded fact."""
        self._iteration_compaction_failed(
            reason=reason, strategy=strategy, steps_recorded=len(self.steps), usage=usage or {}, model=model, timestamp=now,
        )

    class IterationCompactionFailed(Event):
        reason: str
        strategy: str
        steps_recorded: int
        usage: Usage
        model: str

    @event(IterationCompactionFailed)
    def _iteration_compaction_failed(
        self, reason: str, strategy: str, steps_recorded: int, usage: dict[str, Any], model: str, timestamp: datetime,
    ) -> None:
        """Nothing the model reads changes: the failure (and what the call cost) is the fact."""
        self.iteration_compaction_attempts += 1
