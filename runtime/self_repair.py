"""The self-repair monitor: stuck turns and broken tools, detected and repaired as recorded events.

A turn is stuck when it is in flight (pending or running) and neither it nor the tool calls of
its open step have recorded anything for `stuck_after_s` — its process died, or hangs. The
repair hands it to the normal resume path: the turn is marked `interrupted` in the same
transaction as the `retry` attempt, so whichever worker (or `resume`) takes the session next
continues it, and a hung process that wakes later collides on the turn's version instead of
writing twice. When the turn moves again the repair records `success`; after `max_retries`
retries the next detection records `manual_required` and workers leave the session alone.
A `delegate` call in progress is not stuck: its children record the progress (and are watched
themselves).

A tool is broken after `tool_failures` runs in a row that failed (raised, timed out; a tool
that answered with an error result did answer). Chronicle cannot rewrite a tool, so the repair
is `manual_required`; the tool's next run that completes records `success`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Callable
from uuid import UUID, uuid5

from eventsourcing.application import AggregateNotFoundError, EventSourcedLog
from eventsourcing.domain import DomainEvent
from eventsourcing.persistence import IntegrityError
from eventsourcing.utils import get_topic

from chronicle.domain.errors import DomainError
from chronicle.domain.ids import CHRONICLE_NS, tool_call_id
from chronicle.domain.repair import Repair
from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn

from .aggregate_batch import load_many
from .clock import SYSTEM_CLOCK, Clock
from .store import ChronicleStore, ForgottenSession, NotFound, UnreadableEvent

REPAIR_INDEX_ID = uuid5(CHRONICLE_NS, "/repairs")
DEFAULT_STUCK_AFTER_S = 600.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_TOOL_FAILURES = 5
LONG_RUNNING_TOOLS = ("delegate",)
#: The topics of a Session's events (`chronicle.domain.session:Session.…`): only they start or end its turns.
SESSION_TOPICS = f"{get_topic(Session)}."


class RepairLogged(DomainEvent):
    repair_id: UUID


def stuck_repair_id(turn_id: UUID) -> UUID:
    return uuid5(turn_id, "repair/stuck")


@dataclass
class SelfRepair:
    store: ChronicleStore
    clock: Clock = SYSTEM_CLOCK
    stuck_after_s: float = DEFAULT_STUCK_AFTER_S
    max_retries: int = DEFAULT_MAX_RETRIES
    tool_failures: int = DEFAULT_TOOL_FAILURES
    #: Log position up to which tool results were read; None: from the start of the log.
    cursor: int | None = None
    streaks: dict[str, list[tuple[int, str]]] = field(default_factory=dict)
    #: The sessions with a turn in flight (session -> its turn), as of log position `followed`: found by one read of
    #: every session, then kept current from the Session events logged since, so a worker's pass every 10 s reads
    #: only the sessions that changed (reading them all blocked its event loop 0.46 s a pass at 3,000 sessions).
    in_flight: dict[UUID, UUID] | None = None
    followed: int = 0

    @property
    def index(self) -> EventSourcedLog[RepairLogged]:
        return EventSourcedLog(self.store.events, REPAIR_INDEX_ID, RepairLogged)

    def repairs(self) -> list[Repair]:
        """Every repair, in the order detected: read together (runtime/aggregate_batch.py), since a worker lists them
        every pass and they are never deleted (one read each grew with the store's age)."""
        ids = list(dict.fromkeys(entry.repair_id for entry in self.index.get()))
        loaded = load_many(self.store, ids, Repair, self.find)
        return [repair for repair in (loaded[rid] for rid in ids) if isinstance(repair, Repair)]

    def find(self, repair_id: UUID) -> Repair | None:
        try:
            repair: Any = self.store.repository.get(repair_id)
        except AggregateNotFoundError:
            return None
        return repair if isinstance(repair, Repair) else None

    def check(self) -> list[Repair]:
        """One pass over turns and tool results; returns the repairs that recorded something."""
        return self.check_turns() + self.check_tools()

    def blocked(self, session_id: UUID) -> bool:
        """Whether the session's turn in flight waits for a person (manual_required): workers skip it."""
        session = self.store.session(session_id)
        if session.active_turn_id is None:
            return False
        repair = self.find(stuck_repair_id(session.active_turn_id))
        return repair is not None and repair.status == "manual_required"

    # -- stuck turns ---------------------------------------------------------------------------

    def check_turns(self) -> list[Repair]:
        changed = [r for r in map(self._healed, self.repairs()) if r is not None]
        for turn_id in list(self._turns_in_flight().values()):
            try:
                turn = self.store.turn(turn_id)
            except NotFound:
                continue
            repair = self._check_turn(turn)
            if repair is not None:
                changed.append(repair)
        return changed

    def _turns_in_flight(self) -> dict[UUID, UUID]:
        """`in_flight` brought up to the log's head. Only a session's own events start or end its turns, so the
        sessions named by Session events since `followed` (and new ones) are read again, together."""
        head = self.store.max_position()  # first: what is written meanwhile is read next time
        touched: set[UUID] | None = None
        if self.in_flight is None:
            self.in_flight = {}
        else:
            touched = set()
            while self.followed < head:
                batch = self.store.recorder.select_notifications(self.followed + 1, min(1000, head - self.followed))
                if not batch:
                    break
                touched.update(UUID(str(n.originator_id)) for n in batch if n.topic.startswith(SESSION_TOPICS))
                self.followed = batch[-1].id
        if touched is None:  # a session that does not load is skipped (doctor names it), not fatal
            sessions = list(self.store.sessions())
        else:
            loaded = load_many(self.store, list(touched), Session, self._session_or_none)
            sessions = [s for s in loaded.values() if isinstance(s, Session)]
            for sid in touched - {s.id for s in sessions}:
                self.in_flight.pop(sid, None)  # erased or unreadable now
        for session in sessions:
            if session.active_turn_id is None:
                self.in_flight.pop(session.id, None)
            else:
                self.in_flight[session.id] = session.active_turn_id
        self.followed = max(self.followed, head)
        return self.in_flight

    def _session_or_none(self, session_id: UUID) -> Session | None:
        try:
            return self.store.session(session_id)
        except (NotFound, UnreadableEvent, ForgottenSession):
            return None

    def _healed(self, repair: Repair) -> Repair | None:
        """`success` for a stuck turn that recorded something after the last attempt (resumed, or ended)."""
        if repair.kind != "stuck_turn" or repair.status not in ("retrying", "manual_required"):
            return None
        try:
            turn = self.store.turn(UUID(repair.target))
        except NotFound:
            return None
        if turn.status == "interrupted" or turn.modified_on <= repair.last_attempt_at:
            return None
        return self._record(repair, "success", f"the turn moved again ({turn.status})", self.clock.now())

    def _last_activity(self, turn: Turn) -> datetime | None:
        """When the turn or a tool call of its open step last recorded anything; None while a long tool runs."""
        latest = turn.modified_on
        step = turn.open_step
        if step is not None:
            for block in step["response"].get("content", []):
                if block.get("type") != "tool_use":
                    continue
                call = self.store.find_tool_call(tool_call_id(turn.id, step["step"], block["id"]))
                if call is None:
                    continue
                if call.name in LONG_RUNNING_TOOLS and call.status == "running":
                    return None
                latest = max(latest, call.modified_on)
        return latest

    def _check_turn(self, turn: Turn) -> Repair | None:
        now = self.clock.now()
        repair = self.find(stuck_repair_id(turn.id))
        last = self._last_activity(turn)
        if turn.status not in ("pending", "running") or last is None:
            return None
        idle = (now - last).total_seconds()
        if idle < self.stuck_after_s:
            return None
        detail = f"turn {turn.number} has recorded nothing for {idle:.0f} s (threshold {self.stuck_after_s:g} s)"
        if repair is None:
            repair = Repair(id=stuck_repair_id(turn.id), kind="stuck_turn", target=str(turn.id), session_id=turn.session_id,
                            detail=detail, timestamp=now)
        if repair.status in ("manual_required", "failed"):
            return None
        if repair.retries >= self.max_retries:
            return self._record(repair, "manual_required", f"{detail}; {repair.retries} retr(ies) did not help", now)
        try:
            turn.interrupt(f"self-repair: {detail}; handed to resume", now)
        except DomainError as exc:
            return self._record(repair, "failed", f"{detail}; could not hand it to resume: {exc}", now)
        return self._record(repair, "retry", f"{detail}; marked interrupted for resume", now, turn)

    def _record(self, repair: Repair, result: str, detail: str, now: datetime, *others: Any) -> Repair | None:
        repair.attempt(result, detail, now)
        pending = [repair, *others]
        if len(repair.attempts) == 1:  # a new repair: listed in the index in the same transaction
            pending.append(self.index.trigger_event(repair_id=repair.id))
        try:
            self.store.save(*pending)
        except IntegrityError:
            return None  # another monitor recorded it, or the turn moved meanwhile: look again next pass
        return repair

    # -- broken tools --------------------------------------------------------------------------

    def check_tools(self) -> list[Repair]:
        head = self.store.max_position()
        start = (self.cursor or 0) + 1
        self.cursor = head
        changed: list[Repair] = []
        broken = _BrokenTools(self.repairs)
        while start <= head:
            batch = self.store.recorder.select_notifications(start, min(500, head - start + 1))
            if not batch:
                break
            results = [(UUID(str(n.originator_id)), n.id, name == "ToolCall.Failed") for n in batch
                       if (name := n.topic.rsplit(":", 1)[-1]) in ("ToolCall.Completed", "ToolCall.Failed")]
            # The calls of a batch read together (runtime/aggregate_batch.py): `repairs --check` goes through the
            # whole log, and a read per call was most of its time (1.8 s for 3,000 calls on PostgreSQL).
            calls = load_many(self.store, list(dict.fromkeys(r[0] for r in results)), ToolCall, self.store.find_tool_call)
            for call_id, position, failed in results:
                repair = self._tool_result(calls.get(call_id), position, failed, broken)
                if repair is not None:
                    changed.append(repair)
            start = batch[-1].id + 1
        return changed

    def _tool_result(self, call: ToolCall | None, position: int, failed: bool, broken: "_BrokenTools") -> Repair | None:
        if call is None or (failed and call.attempts == 0):
            return None  # never ran (unknown tool, invalid arguments): the model's mistake, not the tool's
        now = self.clock.now()
        if not failed:
            self.streaks.pop(call.name, None)
            oldest = broken.resolved(call.name)
            if oldest is None:
                return None
            open_repair = self.find(oldest)  # as stored now: the object a pass returned stays as it was
            if open_repair is None:
                return None
            return self._record(open_repair, "success", f"{call.name} completed again (log position {position})", now)
        streak = self.streaks.setdefault(call.name, [])
        streak.append((position, (call.output or "")[:300]))
        if len(streak) != self.tool_failures:
            return None
        first, last_error = streak[0][0], streak[-1][1]
        detail = f"{call.name} failed {len(streak)} times in a row (log positions {first}–{position}); last error: {last_error}"
        repair = Repair(id=uuid5(REPAIR_INDEX_ID, f"broken_tool/{call.name}/{first}"), kind="broken_tool", target=call.name,
                        session_id=call.session_id, detail=detail, timestamp=now)
        recorded = self._record(repair, "manual_required", f"{detail}; a tool cannot be rebuilt by the runtime", now)
        if recorded is not None:
            broken.reported(call.name, recorded.id)
        return recorded


class _BrokenTools:
    """The broken tools waiting for a person during one pass over the log, by name: listed at the pass's first
    success (a success ends the oldest of its tool's), then kept up to date, not listed again at every success
    (each listing read every repair of the store)."""

    def __init__(self, repairs: Callable[[], list[Repair]]) -> None:
        self._repairs = repairs
        self._open: dict[str, list[UUID]] | None = None

    def resolved(self, name: str) -> UUID | None:
        """The oldest open repair of the tool `name`, taken off the list (its success is being recorded)."""
        if self._open is None:
            self._open = {}
            for r in self._repairs():
                if r.kind == "broken_tool" and r.status == "manual_required":
                    self._open.setdefault(r.target, []).append(r.id)
        waiting = self._open.get(name)
        return waiting.pop(0) if waiting else None

    def reported(self, name: str, repair_id: UUID) -> None:
        """A repair recorded during the pass: listed already, or found by the listing still to come."""
        if self._open is not None:
            self._open.setdefault(name, []).append(repair_id)


def repair_row(repair: Repair) -> dict[str, Any]:
    """`chronicle repairs --json`: one object per repair."""
    last = repair.attempts[-1] if repair.attempts else {}
    return {
        "repair_id": str(repair.id), "kind": repair.kind, "target": repair.target,
        "session_id": str(repair.session_id) if repair.session_id else None, "status": repair.status,
        "result": last.get("result"), "detail": last.get("detail") or repair.detail, "attempts": repair.attempts,
        "detected_at": repair.detected_at.isoformat(),
    }
