"""A background job: a session run by a worker, independently of the chat or command that made it.

The session holds the work; the Job holds what only a job has: where it came from and whether
someone cancelled it. A cancelled job's queued input is never started by a worker (it stays in
the log, visibly not run); a turn already running is cancelled through the session's usual
cancel request.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .event_type import EventType
from .lifecycle import Edge, Lifecycle

JOB_LIFECYCLE = Lifecycle(
    "Job",
    states=["submitted", "cancelled"],
    initial="submitted",
    edges=[Edge("cancel", ("submitted",), "cancelled")],
    terminal={"cancelled"},
)


class Job(Aggregate):
    #: Declared, not left to eventsourcing to make: an event class written as a subclass of it is
    #: used as it is, where one written on `Aggregate.Event` is built again as a subclass of this,
    #: and EventType makes it without compiling code (domain/event_type.py).
    class Event(Aggregate.Event, metaclass=EventType):
        pass

    class Submitted(Aggregate.Created, Event):
        session_id: UUID
        prompt: str
        origin: str

    @event(Submitted)
    def __init__(self, id: UUID, session_id: UUID, prompt: str, origin: str, timestamp: datetime) -> None:
        self.session_id = session_id
        self.prompt = prompt
        self.origin = origin
        self.status = "submitted"
        self.cancel_reason: str | None = None
        self.submitted_at = timestamp

    def cancel(self, reason: str, now: datetime) -> None:
        JOB_LIFECYCLE.next_state("cancel", self.status, self.id)
        self._cancelled(session_id=self.session_id, reason=reason, timestamp=now)

    class Cancelled(Event):
        session_id: UUID
        reason: str

    @event(Cancelled)
    def _cancelled(self, session_id: UUID, reason: str, timestamp: datetime) -> None:
        self.status = "cancelled"
        self.cancel_reason = reason
