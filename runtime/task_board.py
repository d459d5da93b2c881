"""The task board and failure reflections around `delegate` (domain/task_board.py holds the rules).

`open_task` goes into the same transaction as the child session; `claim_task` runs as the
child starts; `settle_task` reads the child's outcome and completes or fails the task, and a
failed one gets its reflection, indexed so later delegations can find it. Every step is
idempotent on the recorded state, so a parent resumed after a crash settles what it left.

`post_task` puts a task on a session's board ahead of delegation (listed through the session's
board index log, written in the task's transaction); `claimed_board_task` is how a delegate task
item naming its `task_id` takes it for the child it starts, saved with that child session, so a
resumed parent finds the child and never claims twice. Settling it is the same as above.

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

from chronicle.domain.ids import REFLECTION_INDEX_ID, board_index_id, child_session_id, task_id
from chronicle.domain.session import Session
from chronicle.domain.task_board import DelegatedTask, TaskClaimRefused, keywords

from .store import ChronicleStore, NotFound

MAX_REFLECTIONS = 5
MAX_REFLECTION_BYTES = 32 * 1024
#: Only the newest reflections are searched: the index is read whole on every delegation.
SEARCH_WINDOW = 500


class ReflectionLogged(DomainEvent):
    task_id: UUID


class BoardTaskPosted(DomainEvent):
    task_id: UUID


def reflection_index(store: ChronicleStore) -> EventSourcedLog[ReflectionLogged]:
    return EventSourcedLog(store.events, REFLECTION_INDEX_ID, ReflectionLogged)


def board_index(store: ChronicleStore, session_id: UUID) -> EventSourcedLog[BoardTaskPosted]:
    return EventSourcedLog(store.events, board_index_id(session_id), BoardTaskPosted)


def board_task_ids(store: ChronicleStore, session_id: UUID) -> list[UUID]:
    """The tasks posted on the session's board, in the order they were posted (`log` reads them here, not
    through runtime/session_scope.py, whose sub-agent tree would import the loop's modules into `log`)."""
    return [entry.task_id for entry in board_index(store, session_id).get()]


def sub_agent_task_id(store: ChronicleStore, child: Session) -> UUID | None:
    """The task a sub-agent works on, which sits on its parent's board: the board task its delegate item named
    (`task_id`: the child was created with its claim, so a child exists only for a task it claimed), else the
    one that item opened for it (its id derived from the child's). None for a top-level session. One read:
    the delegate call, whose input names the item; a sub-agent imported without its parent has no call
    here, and its parent's board index lists the task it claimed instead."""
    if child.parent_session_id is None:
        return None
    call = store.find_tool_call(child.parent_tool_call_id) if child.parent_tool_call_id is not None else None
    if call is None:  # imported alone (runtime/bundle.py), its parent not here: the board lists what it claimed
        for posted in board_task_ids(store, child.parent_session_id):
            task = get_task(store, posted)
            if task is not None and task.child_session_id == child.id:
                return posted
        return task_id(child.id)
    items = call.input.get("tasks") if isinstance(call.input, dict) else None
    for index, item in enumerate(items if isinstance(items, list) else []):
        if child_session_id(call.id, index) == child.id and isinstance(item, dict):
            try:
                return UUID(str(item.get("task_id") or "").strip())
            except ValueError:
                break  # no task_id (or a blank one): the item opened a task of its own
    return task_id(child.id)


def find_task(store: ChronicleStore, child_id: UUID) -> DelegatedTask | None:
    """The task a delegate call opened for this child (auto-opened, id derived from the child's)."""
    return get_task(store, task_id(child_id))


def get_task(store: ChronicleStore, id_: UUID) -> DelegatedTask | None:
    try:
        aggregate: Any = store.repository.get(id_)
    except AggregateNotFoundError:  # a child started before the task board existed, or no such task
        return None
    return aggregate if isinstance(aggregate, DelegatedTask) else None


def post_task(store: ChronicleStore, session: Session, text: str, agent: str, id_: UUID, now: Any) -> DelegatedTask:
    """Put a task on the session's board, with its index entry, in one transaction (another poster
    taking the same index slot meanwhile makes this one take the next). The text is what someone typed: its
    secrets are cut before it is recorded, and counted on the task (runtime/secret_scan.py)."""
    from .secret_scan import scanner_for

    found = scanner_for(session.spec.workspace).text(text)  # scanned before the task exists to note it on
    task = DelegatedTask.post(id_, session.id, agent, str(found.value), now)
    task.note_redactions("task", found.counts, now)
    events = list(task.collect_events())
    index = board_index(store, session.id)
    for _ in range(50):
        try:
            store.save(*events, index.trigger_event(task_id=task.id))
            return task
        except IntegrityError:
            if get_task(store, task.id) is not None:
                raise
    raise RuntimeError(f"could not index task {task.id} on session {session.id}'s board: its index kept changing")


def claimed_board_task(store: ChronicleStore, parent: Session, raw_id: str, agent: str, child_id: UUID,
                       call_id: UUID, index: int, now: Any) -> DelegatedTask:
    """The board task `raw_id`, claimed (not yet saved) for the child `child_id` of `parent`'s delegate
    call; TaskClaimRefused says why not (unknown, another session's, taken, settled, for another agent)."""
    task = _claimable(store, parent, raw_id, agent, child_id)
    task.claim_for_child(agent, child_id, call_id, index, now)
    return task


def claim_refusal_now(store: ChronicleStore, parent: Session, raw_id: str, agent: str, child_id: UUID) -> str:
    """Why a claim that lost a race to another writer is refused, as the store has it now."""
    try:
        _claimable(store, parent, raw_id, agent, child_id)
    except TaskClaimRefused as exc:
        return str(exc)
    return f"task {raw_id} changed while it was being claimed; try again"


def _claimable(store: ChronicleStore, parent: Session, raw_id: str, agent: str, child_id: UUID) -> DelegatedTask:
    try:
        id_ = UUID(raw_id.strip())
    except ValueError:
        raise TaskClaimRefused(
            f"task_id {raw_id!r} is not a task id; use a task_id from this session's board, or leave task_id out"
        ) from None
    task = get_task(store, id_)
    if task is None:
        raise TaskClaimRefused(f"no task {id_} on any board; use a task_id from this session's board, or leave task_id out")
    if task.parent_session_id != parent.id:
        raise TaskClaimRefused(f"task {id_} is on another session's board ({task.parent_session_id}), not this session's")
    refusal = task.claim_refusal(agent, child_id)
    if refusal is not None:
        raise TaskClaimRefused(refusal)
    return task


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


def settle_task(store: ChronicleStore, child_id: UUID, status: str, summary: str, now: Any, *, crashed: bool = False,
                board_task: UUID | None = None) -> None:
    """Complete or fail the child's task (its auto-opened one, or the `board_task` it claimed) from its
    result. A child paused for an approval or left in flight keeps its task in_progress (resume
    finishes it); a crash fails it."""
    tid = board_task or task_id(child_id)
    task = get_task(store, tid)
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
            fresh = get_task(store, tid)
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
    """The session's board: the tasks posted on it (in the order they were posted, claimed or not), then
    the tasks its delegate calls opened for their children, in the order the calls asked for them."""
    posted = (get_task(store, entry.task_id) for entry in board_index(store, session.id).get())
    found = (find_task(store, sid) for sid in store.delegated_session_ids(session))
    return [task for task in (*posted, *found) if task is not None]


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
    """`chronicle tasks --json`: task_id, agent, status, summary, child_session_id are the contract. A task
    posted on the board and not claimed yet has no child (`child_session_id`, `index`,
    `parent_tool_call_id` null) and `agent` null unless it was posted for one."""
    return {
        "task_id": str(task.id), "agent": task.agent or None, "status": task.status, "summary": task.summary,
        "child_session_id": _s(task.child_session_id), "task": task.task, "index": task.index,
        "parent_tool_call_id": _s(task.parent_tool_call_id), "reflection": task.reflection, "posted": task.posted,
    }


def _s(value: UUID | None) -> str | None:
    return str(value) if value is not None else None
