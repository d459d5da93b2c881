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
    """`tasks add SESSION TEXT [--agent NAME] --json`: the new task's row. An empty text, or an agent the
    session may not delegate to, is AppError 2 and records nothing."""
    sid = session_id(store, ref)
    if not text.strip():
        raise AppError("the task is empty; say what should be done", 2)
    session = store.session(sid)
    name = ""
    if agent is not None:
        known = {a.name.casefold(): a.name for a in targets(session.spec)}
        if agent.strip().casefold() not in known:
            names = ", ".join(sorted(known.values())) or "none"
            raise AppError(f"session {sid} cannot delegate to an agent named {agent!r}; its agents: {names} "
                           "(or leave --agent out to let any of them claim the task)", 2)
        name = known[agent.strip().casefold()]
    return {**task_row(post_task(store, session, text.strip(), name, uuid4(), clock.now())), "instance": None}
