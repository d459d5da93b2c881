"""One firing of a routine: claimed once per due time, then settled from the turn it queued.

The id is derived from the routine and its due time (a cron slot, an event's log position, or
a fresh id for a manual run), so two workers that see the same slot both try to record the
same aggregate and the second one's write collides: the firing is claimed like a lease, and a
routine runs at most once per due time however many workers watch it. A guardrail that says
no (runs per day, cooldown, budget, an empty HEARTBEAT.md) is recorded too, as `skipped`.

`notify` is decided when the routine fires, as a channel input's `reply` is when it is queued: the
channel its findings are to be posted to (runtime/server/notify.py), so naming one later in
chronicle.toml does not send the findings of runs fired before.

`replaces_session_id` is set on the run that started a lightweight routine's session anew because
`chronicle forget` erased the one it kept: nothing can be written into an erased tree, so the
routine goes on in a session of its own again, and this is where that is said.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .event_type import EventType
from .lifecycle import Edge, Lifecycle

ROUTINE_RUN_LIFECYCLE = Lifecycle(
    "RoutineRun",
    states=["fired", "skipped", "completed", "failed"],
    initial="fired",
    edges=[
        Edge("skip", ("fired",), "skipped"),
        Edge("complete", ("fired",), "completed"),
        Edge("fail", ("fired",), "failed"),
    ],
    terminal={"skipped", "completed", "failed"},
)


class RoutineRun(Aggregate):
    #: Declared, not left to eventsourcing to make: an event class written as a subclass of it is
    #: used as it is, where one written on `Aggregate.Event` is built again as a subclass of this,
    #: and EventType makes it without compiling code (domain/event_type.py).
    class Event(Aggregate.Event, metaclass=EventType):
        pass

    class Fired(Aggregate.Created, Event):
        """v2: `notify`, the channel the run's findings go to (None: none, and on older events).
        v3: `replaces_session_id`, the erased session this run's new session takes the place of."""

        class_version = 3
        routine: str
        scope: str
        trigger: str
        due: str
        action: str
        holder: str
        session_id: UUID | None
        input_id: str | None
        notify: str | None
        replaces_session_id: UUID | None

        @staticmethod
        def upcast_v1_v2(state: dict[str, Any]) -> None:
            """Runs fired before routines could notify a channel notified none."""
            state.setdefault("notify", None)

        @staticmethod
        def upcast_v2_v3(state: dict[str, Any]) -> None:
            """Runs fired before a routine's erased session was replaced started none in its place."""
            state.setdefault("replaces_session_id", None)

    @event(Fired)
    def __init__(
        self, id: UUID, routine: str, scope: str, trigger: str, due: str, action: str, holder: str,
        session_id: UUID | None, input_id: str | None, timestamp: datetime, notify: str | None = None,
        replaces_session_id: UUID | None = None,
    ) -> None:
        self.routine = routine
        self.scope = scope
        self.trigger = trigger
        self.due = due
        self.action = action
        self.holder = holder
        self.session_id = session_id
        self.input_id = input_id
        self.notify = notify
        #: A lightweight routine's session erased by `chronicle forget`, which this run's new session replaces.
        self.replaces_session_id = replaces_session_id
        self.status = "fired"
        self.reason: str | None = None
        self.summary = ""
        self.usd = 0.0
        self.fired_at = timestamp
        self.ended_at: datetime | None = None

    @property
    def finished(self) -> bool:
        return self.status in ROUTINE_RUN_LIFECYCLE.terminal

    def skip(self, reason: str, now: datetime) -> None:
        ROUTINE_RUN_LIFECYCLE.next_state("skip", self.status, self.id)
        self._skipped(reason=reason, timestamp=now)

    class Skipped(Event):
        reason: str

    @event(Skipped)
    def _skipped(self, reason: str, timestamp: datetime) -> None:
        self.status = "skipped"
        self.reason = reason
        self.ended_at = timestamp

    def complete(self, summary: str, usd: float, now: datetime) -> None:
        ROUTINE_RUN_LIFECYCLE.next_state("complete", self.status, self.id)
        self._completed(summary=summary, usd=usd, timestamp=now)

    class Completed(Event):
        summary: str
        usd: float

    @event(Completed)
    def _completed(self, summary: str, usd: float, timestamp: datetime) -> None:
        self.status = "completed"
        self.summary = summary
        self.usd = usd
        self.ended_at = timestamp

    def fail(self, reason: str, usd: float, now: datetime) -> None:
        ROUTINE_RUN_LIFECYCLE.next_state("fail", self.status, self.id)
        self._failed(reason=reason, usd=usd, timestamp=now)

    class Failed(Event):
        reason: str
        usd: float

    @event(Failed)
    def _failed(self, reason: str, usd: float, timestamp: datetime) -> None:
        self.status = "failed"
        self.reason = reason
        self.usd = usd
        self.ended_at = timestamp
