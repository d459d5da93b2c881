"""What a session waits for: tool calls awaiting a person, or a turn in flight or queued input to run.

Read by the worker, `resume`, the work index and the approval use cases alike, below all of them
so none has to import another to know whether a session needs work.
"""

from __future__ import annotations

from pathlib import Path

from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall

from .store import ChronicleStore


def pending_approvals(store: ChronicleStore, session: Session) -> list[ToolCall]:
    """Tool calls of the session's paused turn that still wait for a person."""
    if session.active_turn_id is None:
        return []
    turn = store.turn(session.active_turn_id)
    if turn.status != "awaiting_approval":
        return []
    calls = [store.find_tool_call(cid) for cid in turn.awaiting]
    return [c for c in calls if c is not None and c.status == "awaiting_approval"]


def waiting_for_person(store: ChronicleStore, session: Session) -> list[ToolCall]:
    """The pending approvals only a person can decide: not those the session's recorded approval policy
    decides itself (its allow list, policy "allow" or "deny"), which the loop decides as soon as it runs."""
    pending = pending_approvals(store, session)
    if not pending:
        return []
    policy = session.spec.approval_policy
    return [c for c in pending if c.asked_by_hook or policy.decide(c.name) is None]


#: needs_work's reason for a session that owes only the file writes of an interrupted undo/redo --files.
FILES_OWED = "files_owed"


def needs_work(store: ChronicleStore, session: Session, auto_approve: bool = False) -> str | None:
    """Why the session should be advanced now, or None. A turn paused for approval needs work when --yes
    (`auto_approve`) or the recorded approval policy can decide every call it waits for."""
    if session.active_turn_id is not None:
        turn = store.turn(session.active_turn_id)
        if turn.status == "awaiting_approval":
            waiting = waiting_for_person(store, session)
            # --yes answers what the tools' flags and the policy ask, never a hook's question (the doom loop)
            if waiting and (not auto_approve or any(c.asked_by_hook for c in waiting)):
                return None
        return "in_flight"
    if session.queue:
        return "queued"
    owed = getattr(session, "files_owed", None)
    if owed and Path(owed.get("workspace") or ".").is_dir():
        # An interrupted undo/redo --files: a worker finishes the writes (advance_session) though no turn is due.
        # One whose workspace is gone is left to `resume` and `doctor`, which say so, rather than retried each poll.
        return FILES_OWED
    return None
