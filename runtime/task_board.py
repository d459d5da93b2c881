"""The task board and failure reflections around `delegate` (domain/task_board.py holds the rules).

`open_task` goes into the same transaction as the child session; `claim_task` runs as the
child starts; `settle_task` reads the child's outcome and completes or fails the task, and a
failed one gets its reflection, indexed so later delegations can find it. Every step is
idempotent on the recorded state, so a parent resumed after a crash settles what it left.

Before a new child is asked, `with_prior_reflections` prepends the reflections whose keywords
overlap the task's, best match first, at most MAX_REFLECTIONS and MAX_REFLECTION_BYTES (the
seed's 5 files / 32 KB); the child's recorded input holds the result, so replay sees it too.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, EventSourcedLog
from eventsourcing.domain import DomainEvent
from eventsourcing.persistence import IntegrityError

from chronicle.domain.ids import REFLECTION_INDEX_ID, task_id
from chronicle.domain.session import Session
from chronicle.domain.task_board import DelegatedTask, keywords

from .store import ChronicleStore, NotFound

MAX_REFLECTIONS = 5
MAX_REFLECTION_BYTES = 32 * 1024
#: Only the newest reflections are searched: the index is read whole on every delegation.
SEARCH_WINDOW = 500


class ReflectionLogged(DomainEvent):
    task_id: UUID


def reflection_index(store: ChronicleStore) -> EventSourcedLog[ReflectionLogged]:
    return EventSourcedLog(store.events, REFLECTION_INDEX_ID, ReflectionLogged)


def find_task(store: ChronicleStore, child_id: UUID) -> DelegatedTask | None:
    try:
        aggregate: Any = store.repository.get(task_id(child_id))
    except AggregateNotFoundError:  # a child started before the task board existed
        return None
    return aggregate if isinstance(aggregate, DelegatedTask) else None


def open_task(parent: Session, call_id: UUID, index: int, child: Session, task: str) -> DelegatedTask:
    return DelegatedTask(
        id=task_id(child.id), parent_session_id=parent.id, parent_tool_call_id=call_id, child_session_id=child.id,
        index=index, agent=child.spec.name, task=task, timestamp=child.created_at,
    )


def claim_task(store: ChronicleStore, child: Session, now: Any) -> None:
    task = find_task(store, child.id)
    if task is None or task.status != "pending":
        return
    task.claim(child.spec.name, now)
    _save(store, task)


def settle_task(store: ChronicleStore, child_id: UUID, status: str, summary: str, now: Any, *, crashed: bool = False) -> None:
    """Complete or fail the child's task from its result. A child paused for an approval or left
    in flight keeps its task in_progress (resume finishes it); a crash fails it."""
    task = find_task(store, child_id)
    if task is None or task.finished:
        return
    if not crashed and _child_open(store, child_id):
        return
    if status == "completed":
        if task.status == "pending":
            task.claim(task.agent, now)
        task.complete(summary, now)
        _save(store, task)
        return
    for _ in range(20):
        task.fail(summary, now)
        task.reflect(_what_happened(store, child_id, crashed), summary, now)
        logged = reflection_index(store).trigger_event(task_id=task.id)
        try:
            store.save(task, logged)
            return
        except IntegrityError:
            # Another process settled the task, or took the index slot: look again from the store.
            fresh = find_task(store, child_id)
            if fresh is None or fresh.finished:
                return
            task = fresh


def _save(store: ChronicleStore, task: DelegatedTask) -> None:
    try:
        store.save(task)
    except IntegrityError:
        pass  # another process moved the task first; its record stands


def _child_open(store: ChronicleStore, child_id: UUID) -> bool:
    from chronicle.domain.ids import turn_id
    from chronicle.runtime.agents.children import TASK_INPUT_ID

    try:
        turn = store.turn(turn_id(child_id, TASK_INPUT_ID))
    except NotFound:
        return False
    return not turn.finished


def _what_happened(store: ChronicleStore, child_id: UUID, crashed: bool) -> str:
    from chronicle.domain.ids import turn_id
    from chronicle.runtime.agents.children import TASK_INPUT_ID

    try:
        turn = store.turn(turn_id(child_id, TASK_INPUT_ID))
    except NotFound:
        return "the sub-agent crashed before its task turn started" if crashed else "the sub-agent never started its task"
    tools = [c.name for c in store.tool_calls_of(turn)]
    used = ", ".join(f"{n}×{tools.count(n)}" for n in sorted(set(tools))) or "no tools"
    return f"turn {turn.status} after {turn.model_calls} model call(s); tools used: {used}"


def tasks_of(store: ChronicleStore, session: Session) -> list[DelegatedTask]:
    """The tasks the session delegated, in the order its delegate calls asked for them."""
    found = (find_task(store, sid) for sid in store.delegated_session_ids(session))
    return [task for task in found if task is not None]


def reflections(store: ChronicleStore) -> list[DelegatedTask]:
    """Failed tasks with a reflection, newest first (within the search window)."""
    entries = list(reflection_index(store).get())[-SEARCH_WINDOW:]
    tasks = []
    for entry in reversed(entries):
        try:
            task: Any = store.repository.get(entry.task_id)
        except AggregateNotFoundError:
            continue
        if isinstance(task, DelegatedTask) and task.reflection is not None:
            tasks.append(task)
    return tasks


def prior_reflections(store: ChronicleStore, task: str) -> list[dict[str, Any]]:
    wanted = set(keywords(task))
    if not wanted:
        return []
    scored = []
    for order, found in enumerate(reflections(store)):
        reflection = found.reflection or {}
        overlap = len(wanted & set(reflection.get("keywords") or []))
        if overlap:
            scored.append((-overlap, order, reflection))
    chosen: list[Any] = []
    size = 0
    for _, _, reflection in sorted(scored, key=lambda s: (s[0], s[1])):
        text = render(reflection)
        if len(chosen) >= MAX_REFLECTIONS or size + len(text.encode()) > MAX_REFLECTION_BYTES:
            break
        chosen.append(reflection)
        size += len(text.encode())
    return chosen


def render(reflection: dict[str, Any]) -> str:
    return (
        f"<reflection agent=\"{reflection.get('agent', '')}\" at=\"{reflection.get('at', '')}\">\n"
        f"task: {reflection.get('task', '')}\nwhat happened: {reflection.get('what_happened', '')}\n"
        f"failure: {reflection.get('failure', '')}\n</reflection>"
    )


def with_prior_reflections(store: ChronicleStore, task: str, text: str) -> str:
    chosen = prior_reflections(store, task)
    if not chosen:
        return text
    notes = "\n".join(render(r) for r in chosen)
    return (
        "<prior_reflections>\nEarlier attempts at similar tasks failed; learn from them.\n"
        f"{notes}\n</prior_reflections>\n\n{text}"
    )


def task_row(task: DelegatedTask) -> dict[str, Any]:
    """`chronicle tasks --json`: task_id, agent, status, summary, child_session_id are the contract."""
    return {
        "task_id": str(task.id), "agent": task.agent, "status": task.status, "summary": task.summary,
        "child_session_id": str(task.child_session_id), "task": task.task, "index": task.index,
        "parent_tool_call_id": str(task.parent_tool_call_id), "reflection": task.reflection,
    }
