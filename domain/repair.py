"""Self-repair: a stuck turn or a broken tool, and every attempt to set it right, as events.

A `Repair` is opened when the monitor detects a problem (a turn in flight with no event for
longer than a threshold; a tool that failed N times in a row) and records each attempt with
the seed's results: `retry` (handed back to the normal resume path), `success` (the turn
moved again, the tool answered), `failed`, `manual_required` (attempts exhausted, or nothing
the runtime can do: a person has to look). Its id is derived from what it repairs, so two
monitors that see the same problem record one repair; a turn that gets stuck again after a
success reopens the same repair, so its retries count over the turn's whole life.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .event_type import EventType
from .lifecycle import Edge, Lifecycle

REPAIR_LIFECYCLE = Lifecycle(
    "Repair",
    states=["detected", "retrying", "resolved", "failed", "manual_required"],
    initial="detected",
    edges=[
        Edge("retry", ("detected", "retrying", "resolved"), "retrying"),
        Edge("success", ("detected", "retrying", "manual_required"), "resolved"),
        Edge("failed", ("detected", "retrying", "resolved"), "failed"),
        Edge("manual_required", ("detected", "retrying", "resolved"), "manual_required"),
    ],
    terminal={"failed"},
)
RESULTS = ("retry", "success", "failed", "manual_required")


class Repair(Aggregate):
    #: Declared, not left to eventsourcing to make: an event class written as a subclass of it is
    #: used as it is, where one written on `Aggregate.Event` is built again as a subclass of this,
    #: and EventType makes it without compiling code (domain/event_type.py).
    class Event(Aggregate.Event, metaclass=EventType):
        pass

    class Detected(Aggregate.Created, Event):
        kind: str
        target: str
        session_id: UUID | None
        detail: str

    @event(Detected)
    def __init__(self, id: UUID, kind: str, target: str, session_id: UUID | None, detail: str, timestamp: datetime) -> None:
        self.kind = kind
        self.target = target
        self.session_id = session_id
        self.detail = detail
        self.status = "detected"
        self.attempts: list[dict[str, Any]] = []
        self.detected_at = timestamp

    @property
    def retries(self) -> int:
        return sum(1 for a in self.attempts if a["result"] == "retry")

    @property
    def last_attempt_at(self) -> datetime:
        return datetime.fromisoformat(self.attempts[-1]["at"]) if self.attempts else self.detected_at

    def attempt(self, result: str, detail: str, now: datetime) -> None:
        REPAIR_LIFECYCLE.next_state(result, self.status, self.id)
        self._attempted(result=result, detail=detail, timestamp=now)

    class Attempted(Event):
        result: str
        detail: str

    @event(Attempted)
    def _attempted(self, result: str, detail: str, timestamp: datetime) -> None:
        self.attempts.append({"result": result, "detail": detail, "at": timestamp.isoformat()})
        self.status = {"retry": "retrying", "success": "resolved"}.get(result, result)
