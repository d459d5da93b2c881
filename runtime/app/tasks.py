"""The task board of a session (`chronicle tasks`): listed, and a task put on it ahead of delegation.

A posted task waits, `pending` with no child, until a `delegate` task item names its task_id; the
child that item starts claims it and its outcome settles it (runtime/task_board.py).
"""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from chronicle.runtime.agents.registry import targets
from chronicle.runtime.task_board import post_task, task_row, tasks_of

from ..clock import SYSTEM_CLOCK, Clock
from ..store import ChronicleStore, NotFound
from .errors import AppError
from .queries import session_id


def listing(store: ChronicleStore, ref: str | UUID) -> list[dict[str, Any]]:
    """`tasks SESSION --json`: the tasks posted on the session's board, then those its delegate calls opened; each
    with its child's instance name (seed 004, null before a child took it or for a child recorded before them)."""
    rows = []
    for task in tasks_of(store, store.session(session_id(store, ref))):
        child = None if task.child_session_id is None else _child_instance(store, task.child_session_id)
        rows.append({**task_row(task), "instance": child})
    return rows


def _child_instance(store: ChronicleStore, child: UUID) -> str | None:
    try:
        return store.session(child, copy=False).agent_instance or None
    except NotFound:  # a board task claimed by a child that was never written (a crash between the two)
        return None


def add(store: ChronicleStore, ref: str | UUID, text: str, agent: str | None = None, clock: Clock = SYSTEM_CLOCK) -> dict[str, Any]:
    """`tasks add SESSION TEXT [--agent NAME] --json`: the new task's row. An empty text, a session that cannot
    delegate (no sub-agents, or at its depth limit), or an agent it may not delegate to, is AppError 2 and records
    nothing."""
    sid = session_id(store, ref)
    if not text.strip():
        raise AppError("the task is empty; say what should be done", 2)
    session = store.session(sid)
    spec = session.spec
    known = {a.name.casefold(): a.name for a in targets(spec)} if spec.may_delegate else {}
    if not known:  # only a delegate call claims a board task: here none ever would, so it would wait forever
        why = f"it is at depth {spec.depth} of {spec.max_depth}" if spec.registry and not spec.may_delegate else "it has no sub-agents"
        raise AppError(f"session {sid} cannot delegate ({why}), so no agent would ever claim a task on its board; "
                       "add it to the session whose agent delegates", 2)
    name = ""
    if agent is not None:
        if agent.strip().casefold() not in known:
            raise AppError(f"session {sid} cannot delegate to an agent named {agent!r}; its agents: "
                           f"{', '.join(sorted(known.values()))} (or leave --agent out to let any of them claim the task)", 2)
        name = known[agent.strip().casefold()]
    return {**task_row(post_task(store, session, text.strip(), name, uuid4(), clock.now())), "instance": None}
