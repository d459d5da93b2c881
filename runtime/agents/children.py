"""Running one child: its own Session and loop over the parent's store, provider, broker and guards.

A child's session id is derived from the parent's tool call and the task's index, so a parent
that re-runs its delegate call after a crash finds the children it already started and
continues them instead of spawning new ones. Whatever happens to the child, the parent gets one
result for it: task_complete's own report (after the checks the child runs under), or a synthetic
one saying why there is none.
"""

from __future__ import annotations

from typing import Any, Literal
from uuid import UUID

from eventsourcing.persistence import IntegrityError, PersistenceError
from pydantic import BaseModel, Field

from chronicle.domain.agent_spec import DEFAULT_PREFIX, AgentSpec
from chronicle.domain.ids import child_session_id, turn_id
from chronicle.domain.session import Session
from chronicle.domain.task_board import TaskClaimRefused
from chronicle.runtime.hooks import Hooks
from chronicle.runtime.live import AgentEnd, AgentStart
from chronicle.runtime.store import ChronicleStore, NotFound
from chronicle.runtime.task_board import claim_refusal_now, claim_task, claimed_board_task, open_task, settle_task, sub_agent_task_id

from .slots import child_slot

TASK_INPUT_ID = "delegated-task"


class ChildResult(BaseModel):
    """What the parent reads about one child, in the one delegate result."""

    agent: str
    #: None: no child was started (its task_id could not be claimed).
    session_id: str | None
    status: Literal["completed", "failed"]
    summary: str
    files_modified: list[str] = Field(default_factory=list)
    tests_run: list[str] = Field(default_factory=list)
    caveats: str | None = None
    #: Came from task_complete (not a final text, which the child's own loop already checked).
    reported: bool = Field(False, exclude=True)
    #: What the checks changed in the report (runtime/guardrails.py marks), for the delegate call's effects.
    marks: list[dict[str, Any]] = Field(default_factory=list, exclude=True)
    #: The board task the item claimed (given only for an item that named a task_id).
    task_id: str | None = None
    #: The child's instance name (seed 004, domain/instance_names.py); "" for a child recorded before them.
    instance: str = ""

    def row(self) -> dict[str, Any]:
        """The result as the delegate call reports it; task_id only for an item that named one, instance only
        for a child that has one (a result of an older child reads as it did)."""
        left_out = ({"task_id"} if self.task_id is None else set()) | (set() if self.instance else {"instance"})
        return self.model_dump(exclude=left_out or None)


def task_text(task: str, context: str) -> str:
    if not context.strip():
        return task
    return f"<delegation_context>\n{context.strip()}\n</delegation_context>\n\n{task}"


def find_session(store: ChronicleStore, session_id: UUID) -> Session | None:
    try:
        return store.session(session_id)
    except NotFound:
        return None


def open_child(
    parent_io: Any, parent: Session, parent_call_id: UUID, index: int, spec: AgentSpec, text: str, task: str = "",
    board_task: str | None = None,
) -> Session:
    """The child session for task `index` of this call: the stored one if it exists, else a new one,
    opened together with its task-board entry (`task` is the request as the model wrote it).

    With `board_task` (the item's task_id) the child claims that task on the parent's board instead,
    in the same transaction, so a resumed parent that finds the child finds its claim too and never
    claims again; a task it may not take raises TaskClaimRefused and no child is created."""
    store: ChronicleStore = parent_io.store
    sid = child_session_id(parent_call_id, index)
    existing = find_session(store, sid)
    if existing is not None:
        return existing
    now = parent_io.clock.now()
    spec = tool_names_at_spawn(spec, parent_io.workspace)
    child = Session.start(sid, spec, now, parent_session_id=parent.id, parent_tool_call_id=parent_call_id)
    child.queue_input(TASK_INPUT_ID, text, now, kind="task")
    if board_task is None:
        entry = open_task(parent, parent_call_id, index, child, task or text)
    else:
        entry = claimed_board_task(store, parent, board_task, spec.name, sid, parent_call_id, index, now)
    try:
        store.create_session(child, entry)
    except IntegrityError:  # another process created it a moment ago: continue that one
        existing = find_session(store, sid)
        if existing is None and board_task is not None:  # the task was taken by another writer meanwhile
            raise TaskClaimRefused(claim_refusal_now(store, parent, board_task, spec.name, sid)) from None
        return existing if existing is not None else store.session(sid)
    return child


def tool_names_at_spawn(spec: AgentSpec, workspace: Any) -> AgentSpec:
    """The child's spec with the names its import paths hold now, when it is spawned, as its toolbox is built
    (`AgentSpec.import_tools`). Its definition carries those of when the top-level session started: a child
    spawned after a path changed then claimed tools it never had (a false note when it is continued) and left out
    those it had, so a tool its history called could vanish with no refusal (runtime/app/vanished_tools.py).
    A path whose tool was deleted or renamed since holds none (the child goes without it, as its loop does); one
    that does not load otherwise keeps the definition's names: the child's loop fails to build, saying why."""
    from chronicle.runtime.tools.imports import ToolGone, ToolLoadError, is_import_path, load_tools

    paths = [entry for entry in spec.tools if is_import_path(entry)]
    if not paths:
        return spec

    def names(path: str) -> tuple[str, ...]:
        try:
            return tuple(t.name for t in load_tools(path, workspace))
        except ToolGone:
            return ()

    try:
        held = {path: names(path) for path in paths}
    except ToolLoadError:
        return spec
    return spec.model_copy(update={"import_tools": held})


def refused_result(agent: str, task_id: str, reason: str) -> ChildResult:
    """A task item whose task_id could not be claimed: failed at once, no child started."""
    return ChildResult(agent=agent, session_id=None, status="failed", task_id=task_id,
                       summary=f"not started: task_id {task_id} cannot be claimed: {reason}")


async def run_child(parent_io: Any, child: Session, board_task: UUID | None = None) -> ChildResult:
    """Drive the child's task turn while it holds one of the process's sub-agent slots (slots.py);
    `board_task`: the board task it claimed, settled instead of an auto-opened one."""
    async with child_slot():
        result = await _run_child(parent_io, child, board_task)
    return result if board_task is None else result.model_copy(update={"task_id": str(board_task)})


async def _run_child(parent_io: Any, child: Session, board_task: UUID | None) -> ChildResult:
    """Drive the child's task turn to its end (starting or continuing it) and report on it.

    The child's loop comes from the parent's I/O bundle (`spawn`), so this module needs no loop."""
    spec = child.spec
    loop = parent_io.spawn(spec)
    links = {"parent_session_id": str(child.parent_session_id), "parent_tool_call_id": str(child.parent_tool_call_id)}
    await loop.emit(AgentStart(session_id=str(child.id), agent=spec.name, depth=spec.depth, prefix=spec.prefix or DEFAULT_PREFIX,
                               instance=spec.instance or None, **links))
    crashed = False
    try:
        claim_task(parent_io.store, child, loop.clock.now())
        await loop.run_next(child.id)
        result = await checked_report(loop.hooks, parent_io.store, child_result(parent_io.store, child.id))
    except Exception as exc:  # noqa: BLE001 - one child's crash is that child's failed result, not the parent's
        crashed = True
        result = ChildResult(agent=spec.name, session_id=str(child.id), status="failed", instance=spec.instance,
                             summary=f"the sub-agent could not run: {type(exc).__name__}: {exc}")
    try:
        settle_task(parent_io.store, child.id, result.status, result.summary, loop.clock.now(), crashed=crashed,
                    board_task=board_task)
    except PersistenceError:
        pass  # the store is gone: the task stays in_progress and a resumed parent settles it
    await loop.emit(
        AgentEnd(session_id=str(child.id), agent=spec.name, instance=spec.instance or None, status=result.status,
                 reason=None if result.status == "completed" else result.summary, depth=spec.depth, **links)
    )
    return result


async def settle_resumed(store: ChronicleStore, child: Session, hooks: Hooks, now: Any) -> None:
    """Settle the task of a sub-agent whose task turn finished outside its parent's delegate call: paused for an
    approval, it was reported failed to the parent (which went on), then approved and resumed on its own session
    (`resume`, a worker). Its report passes the checks the delegate call applies, and the board then says how the
    task ended. Nothing for a top-level session, a task turn still open, or a task already settled."""
    if child.parent_session_id is None:
        return
    try:
        if not store.turn(turn_id(child.id, TASK_INPUT_ID)).finished:
            return
    except NotFound:
        return
    result = await checked_report(hooks, store, child_result(store, child.id))
    try:
        settle_task(store, child.id, result.status, result.summary, now, board_task=sub_agent_task_id(store, child))
    except PersistenceError:
        pass  # the store is gone: the task stays in_progress (the turn is recorded; only the board lags)


def child_result(store: ChronicleStore, child_id: UUID) -> ChildResult:
    """Read the child's outcome from its recorded task turn."""
    session = store.session(child_id)
    base = {"agent": session.spec.name, "session_id": str(child_id), "instance": session.spec.instance}
    try:
        turn = store.turn(turn_id(child_id, TASK_INPUT_ID))
    except NotFound:
        return ChildResult(**base, status="failed", summary="the sub-agent never started its task")
    if turn.status == "completed":
        report = next(
            (c for c in store.tool_calls_of(turn) if c.name == "task_complete" and c.status == "completed" and c.ends_turn),
            None,
        )
        if report is not None:
            data = report.input
            return ChildResult(
                **base, status="failed" if data.get("status") == "failed" else "completed",
                summary=str(data.get("summary", "")), files_modified=list(data.get("files_modified") or []),
                tests_run=list(data.get("tests_run") or []), caveats=data.get("caveats"), reported=True,
            )
        return ChildResult(
            **base, status="completed", summary=turn.final_text or "(the sub-agent gave no answer)",
            caveats="the sub-agent ended without calling task_complete; its final text is the summary",
        )
    if turn.status == "awaiting_approval":
        summary = "the sub-agent is paused waiting for a tool approval (approve it on its session, then resume)"
    elif turn.status in ("failed", "stopped", "cancelled"):
        summary = f"the sub-agent {turn.status}: {turn.reason or 'no reason recorded'}"
    else:
        summary = f"the sub-agent did not finish: its turn is {turn.status}"
    return ChildResult(**base, status="failed", summary=summary)


async def checked_report(hooks: Hooks, store: ChronicleStore, result: ChildResult) -> ChildResult:
    """A task_complete report is the sub-agent's final answer: its summary and caveats pass the checks
    the sub-agent runs under at `final` (its parent's, then its own) before the parent reads them, as a
    final text already did in the sub-agent's loop. A change is marked (digests, never the removed
    text) for the delegate call's effects; a rejection makes the result failed with the check's reason.
    Checked each time the report is read, so a parent resumed after a crash reads the same."""
    if not result.reported:
        return result
    session = store.session(UUID(result.session_id))
    turn = store.turn(turn_id(session.id, TASK_INPUT_ID))
    update: dict[str, Any] = {}
    marks: list[dict[str, Any]] = []
    for name in ("summary", "caveats"):
        value = getattr(result, name)
        if not value:
            continue
        checked = await hooks.check_final(session, turn, value)
        if checked.stop is not None:
            return result.model_copy(update={"status": "failed", "summary": f"the sub-agent failed: {checked.stop.reason}", "caveats": None})
        update[name] = checked.text
        marks.extend({**mark, "agent": result.agent, "session_id": result.session_id, "field": name} for mark, _ in checked.marks)
    return result.model_copy(update={**update, "marks": marks})
