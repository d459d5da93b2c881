"""The task board: one DelegatedTask per child a `delegate` call starts, shared by parent and child.

Status runs `pending → in_progress → completed | failed`. The parent opens the task with the
child session (one transaction), the child's run claims it, and its outcome settles it; a
child that crashes or errors rolls the task to `failed` rather than leaving it `in_progress`.
The id is derived from the child session's id, so a parent resumed after a crash finds the
task it already opened.

A failed task also carries its failure reflection (what was asked, what happened, why it
failed, and the keywords later delegations are matched on), so the lesson is an event of the
task it came from rather than a loose file.
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .event_type import EventType
from .lifecycle import Edge, Lifecycle

TASK_LIFECYCLE = Lifecycle(
    "DelegatedTask",
    states=["pending", "in_progress", "completed", "failed"],
    initial="pending",
    edges=[
        Edge("claim", ("pending",), "in_progress"),
        Edge("complete", ("in_progress",), "completed"),
        Edge("fail", ("pending", "in_progress"), "failed"),
    ],
    terminal={"completed", "failed"},
)

STOPWORDS = frozenset([
    "the", "and", "for", "with", "that", "this", "from", "into", "what", "when", "then", "than", "them", "they",
    "their", "there", "were", "have", "has", "had", "not", "but", "you", "your", "are", "was", "will", "would",
    "should", "could", "can", "all", "any", "each", "only", "also", "about", "over", "under", "after", "before",
    "which", "who", "how", "why", "its", "it's", "our", "out", "off", "one", "two", "use", "using", "make", "made",
    "does", "done", "task", "agent", "file", "files",
])
WORD = re.compile(r"[a-z0-9_][a-z0-9_.-]*[a-z0-9_]|[a-z0-9]")


def keywords(text: str) -> list[str]:
    """Words of four letters or more that are not stopwords, sorted: what reflections are matched on."""
    return sorted({w for w in WORD.findall(text.lower()) if len(w) >= 4 and w not in STOPWORDS})


class DelegatedTask(Aggregate):
    #: Declared, not left to eventsourcing to make: an event class written as a subclass of it is
    #: used as it is, where one written on `Aggregate.Event` is built again as a subclass of this,
    #: and EventType makes it without compiling code (domain/event_type.py).
    class Event(Aggregate.Event, metaclass=EventType):
        pass

    class Opened(Aggregate.Created, Event):
        parent_session_id: UUID
        parent_tool_call_id: UUID
        child_session_id: UUID
        index: int
        agent: str
        task: str

    @event(Opened)
    def __init__(
        self, id: UUID, parent_session_id: UUID, parent_tool_call_id: UUID, child_session_id: UUID, index: int,
        agent: str, task: str, timestamp: datetime,
    ) -> None:
        self.parent_session_id = parent_session_id
        self.parent_tool_call_id = parent_tool_call_id
        self.child_session_id = child_session_id
        self.index = index
        self.agent = agent
        self.task = task
        self.status = "pending"
        self.claimed_by: str | None = None
        self.summary = ""
        self.reflection: dict[str, Any] | None = None
        self.opened_at = timestamp
        self.updated_at = timestamp

    @property
    def finished(self) -> bool:
        return self.status in TASK_LIFECYCLE.terminal

    def claim(self, agent: str, now: datetime) -> None:
        TASK_LIFECYCLE.next_state("claim", self.status, self.id)
        self._claimed(agent=agent, timestamp=now)

    class Claimed(Event):
        agent: str

    @event(Claimed)
    def _claimed(self, agent: str, timestamp: datetime) -> None:
        self.status = "in_progress"
        self.claimed_by = agent
        self.updated_at = timestamp

    def complete(self, summary: str, now: datetime) -> None:
        TASK_LIFECYCLE.next_state("complete", self.status, self.id)
        self._completed(summary=summary, timestamp=now)

    class Completed(Event):
        summary: str

    @event(Completed)
    def _completed(self, summary: str, timestamp: datetime) -> None:
        self.status = "completed"
        self.summary = summary
        self.updated_at = timestamp

    def fail(self, summary: str, now: datetime) -> None:
        TASK_LIFECYCLE.next_state("fail", self.status, self.id)
        self._failed(summary=summary, timestamp=now)

    class Failed(Event):
        summary: str

    @event(Failed)
    def _failed(self, summary: str, timestamp: datetime) -> None:
        self.status = "failed"
        self.summary = summary
        self.updated_at = timestamp

    def reflect(self, what_happened: str, failure: str, now: datetime) -> None:
        """The failure reflection; only a failed task has one, and only one."""
        if self.status != "failed" or self.reflection is not None:
            return
        self._reflection_recorded(
            task=self.task, what_happened=what_happened, failure=failure, keywords=keywords(self.task), timestamp=now
        )

    class ReflectionRecorded(Event):
        task: str
        what_happened: str
        failure: str
        keywords: list[str]

    @event(ReflectionRecorded)
    def _reflection_recorded(self, task: str, what_happened: str, failure: str, keywords: list[str], timestamp: datetime) -> None:
        self.reflection = {
            "task": task, "what_happened": what_happened, "failure": failure, "keywords": list(keywords),
            "agent": self.agent, "at": timestamp.isoformat(),
        }
