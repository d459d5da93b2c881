"""The task board: one DelegatedTask per child a `delegate` call starts, shared by parent and child.

Status runs `pending → in_progress → completed | failed`. The parent opens the task with the
child session (one transaction), the child's run claims it, and its outcome settles it; a
child that crashes or errors rolls the task to `failed` rather than leaving it `in_progress`.
The id is derived from the child session's id, so a parent resumed after a crash finds the
task it already opened.

A task can also be posted on a session's board before any delegation (`Posted`: no child
yet, perhaps no agent): a `delegate` task item naming its id claims it for the child it
starts (`ClaimedByChild`, which links the child), and the child's outcome settles it as above.

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

from .errors import DomainError
from .event_type import EventType
from .lifecycle import Edge, Lifecycle


class TaskClaimRefused(DomainError):
    """A delegate task item named a board task its child may not take (say why, record nothing)."""


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

    #: Posted on the board ahead of delegation (no child until one claims it).
    posted = False

    class Opened(Aggregate.Created, Event):
        parent_session_id: UUID
        parent_tool_call_id: UUID
        child_session_id: UUID
        index: int
        agent: str
        task: str

    @event(Opened)
    def __init__(
        self, id: UUID, parent_session_id: UUID, agent: str, task: str, timestamp: datetime,
        parent_tool_call_id: UUID | None = None, child_session_id: UUID | None = None, index: int | None = None,
    ) -> None:
        self.parent_session_id = parent_session_id
        self.parent_tool_call_id: UUID | None = parent_tool_call_id
        self.child_session_id: UUID | None = child_session_id
        self.index: int | None = index
        self.agent = agent
        self.task = task
        self.status = "pending"
        self.claimed_by: str | None = None
        self.summary = ""
        self.reflection: dict[str, Any] | None = None
        self.opened_at = timestamp
        self.updated_at = timestamp

    @classmethod
    def post(cls, id: UUID, parent_session_id: UUID, agent: str, task: str, timestamp: datetime) -> "DelegatedTask":
        """A task on the session's board ahead of delegation; `agent` "" lets any agent claim it."""
        return cls._create(cls.Posted, id=id, parent_session_id=parent_session_id, agent=agent, task=task, timestamp=timestamp)

    class Posted(Aggregate.Created, Event):
        parent_session_id: UUID
        agent: str
        task: str

        def apply(self, aggregate: Any) -> None:
            # No child and no delegate call yet: ClaimedByChild links them.
            aggregate.parent_tool_call_id = None
            aggregate.child_session_id = None
            aggregate.index = None
            aggregate.posted = True

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

    def claim_for_child(self, agent: str, child_session_id: UUID, parent_tool_call_id: UUID, index: int, now: datetime) -> None:
        """A posted task taken by the child a delegate task item starts for it."""
        refusal = self.claim_refusal(agent, child_session_id)
        if refusal is not None:
            raise TaskClaimRefused(refusal)
        TASK_LIFECYCLE.next_state("claim", self.status, self.id)
        self._claimed_by_child(agent=agent, child_session_id=child_session_id, parent_tool_call_id=parent_tool_call_id,
                               index=index, timestamp=now)

    def claim_refusal(self, agent: str, child_session_id: UUID) -> str | None:
        """Why the child cannot claim this task, or None if it can."""
        if self.child_session_id == child_session_id:
            return None if self.status == "pending" else f"task {self.id} is already claimed by this child"
        if not self.posted:
            return f"task {self.id} belongs to a delegate call of its own (agent {self.agent!r}); only a task added to a board can be claimed"
        if self.status != "pending":
            by = f" (claimed by {self.claimed_by!r} for child session {self.child_session_id})" if self.claimed_by else ""
            return f"task {self.id} is already {self.status}{by}; add a new task to the board for this work"
        if self.agent and self.agent.casefold() != agent.casefold():
            return f"task {self.id} is for agent {self.agent!r}, not {agent!r}; delegate it to {self.agent!r}"
        return None

    class ClaimedByChild(Event):
        agent: str
        child_session_id: UUID
        parent_tool_call_id: UUID
        index: int

    @event(ClaimedByChild)
    def _claimed_by_child(self, agent: str, child_session_id: UUID, parent_tool_call_id: UUID, index: int,
                          timestamp: datetime) -> None:
        self.status = "in_progress"
        self.claimed_by = agent
        self.agent = agent
        self.child_session_id = child_session_id
        self.parent_tool_call_id = parent_tool_call_id
        self.index = index
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

    # -- secrets cut out before recording -----------------------------------------------------

    def note_redactions(self, where: str, counts: dict[str, int], now: datetime) -> None:
        """How many secrets of each kind were cut out of the posted task's text before it was recorded."""
        if counts:
            self._secrets_redacted(where=where, counts=dict(counts), timestamp=now)

    class SecretsRedacted(Event):
        where: str
        counts: dict[str, int]

    @event(SecretsRedacted)
    def _secrets_redacted(self, where: str, counts: dict[str, int], timestamp: datetime) -> None:
        """Nothing changes: the count is the fact, for the audit (the text was redacted before it was recorded)."""
