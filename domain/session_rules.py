"""What a Session's commands refuse, and why: the checks each makes before it records anything.

Apart from the aggregate so that its module holds the event vocabulary and thin commands: each
command asks its rule here, then records. A rule reads the session and raises DomainError (one
clear line, nothing recorded); it never records, and no `@event` body asks it, so a rule may change
without changing how old events replay.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

from .errors import DomainError

if TYPE_CHECKING:
    from .session import Session


def check_new_input(session: Session, input_id: str, origin: dict[str, Any] | None) -> None:
    """An input is queued once; a channel's input names its channel and who sent it."""
    if any(item["input_id"] == input_id for item in session.queue):
        raise DomainError(f"input {input_id} is already queued on session {session.id}")
    if origin is not None and (not origin.get("channel") or not origin.get("senders")):
        raise DomainError("an input's origin names its channel and at least one sender")


def check_reply_unrecorded(session: Session, turn_id: UUID) -> None:
    """Once per turn: a second outbox finding the reply recorded already leaves it."""
    if str(turn_id) in session.replies:
        raise DomainError(f"the reply of turn {turn_id} is recorded already ({session.replies[str(turn_id)]})")


def turns_to_undo(session: Session, count: int) -> list[UUID]:
    """The newest `count` turns of the branch, of an idle session."""
    if session.status != "idle":
        raise DomainError(f"session {session.id} is busy; cancel or wait for the running turn before undo")
    check_no_files_owed(session, "undo")
    if count < 1:
        raise DomainError("undo needs a count of at least 1")
    if count > len(session.head):
        raise DomainError(f"session {session.id} has {len(session.head)} turn(s) on its branch; cannot undo {count}")
    return session.head[-count:]


def turns_to_redo(session: Session) -> list[UUID]:
    """The turns the newest undo took off the branch, of an idle session."""
    if session.status != "idle":
        raise DomainError(f"session {session.id} is busy; wait for the running turn before redo")
    check_no_files_owed(session, "redo")
    if not session.redo_stack:
        raise DomainError(f"session {session.id} has nothing to redo")
    return session.redo_stack[-1]


def check_no_files_owed(session: Session, command: str) -> None:
    """An undo or redo --files whose file writes were cut off (a crash) is finished before another
    moves the branch: stacked on it, the owed files would be put back for the wrong turns."""
    owed = session.files_owed
    if owed:
        raise DomainError(f"session {session.id}: the files of the last {owed['kind']} --files are not all written yet; "
                          f"`chronicle resume {session.id}` finishes that before {command}")


def check_archivable(session: Session, queue_never_runs: bool = False) -> None:
    """Only an idle session with nothing queued is archived, so no worker is left continuing a
    session nobody sees. `queue_never_runs`: its queued inputs are a cancelled job's, which no worker
    or resume runs (`sessions` lists it cancelled, nothing queued), so they keep nothing going."""
    if session.archived:
        raise DomainError(f"session {session.id} is already archived")
    if session.status != "idle" or (session.queue and not queue_never_runs):
        raise DomainError(f"session {session.id} has a turn running or inputs queued; cancel or wait for them before archiving")


def check_model_choice(model: str, thinking_tokens: int | None) -> None:
    if not model.strip():
        raise DomainError("the model name is empty")
    if thinking_tokens is not None and thinking_tokens < 0:
        raise DomainError("thinking tokens cannot be negative")


def check_steering(session: Session, text: str, turn_id: UUID | None) -> None:
    """A steering message says something, and reaches only the turn it was meant for: if `turn_id`
    is no longer the running one, nothing is recorded (a message meant for a turn that ended must
    not become the next input unasked)."""
    if not text.strip():
        raise DomainError("the steering message is empty")
    if turn_id is not None and session.active_turn_id != turn_id:
        if not has_turn(session, turn_id):  # a mistyped or another session's id: "has ended" would say it once ran
            raise DomainError(f"session {session.id} has no turn {turn_id}; nothing was steered")
        now_running = f"turn {session.active_turn_id} is running now" if session.active_turn_id else "no turn is running"
        raise DomainError(f"turn {turn_id} has ended ({now_running}); nothing was steered")


def has_turn(session: Session, turn_id: UUID) -> bool:
    """Whether `turn_id` is one of the session's turns: one it ran, or one of its branch (a fork's head starts with
    its parent's), undone ones included."""
    return turn_id in session.turns or turn_id in session.head or any(turn_id in undone for undone in session.redo_stack)


def check_pending_steering(session: Session, steer_ids: list[str]) -> None:
    pending = {s["steer_id"] for s in session.steering}
    missing = [i for i in steer_ids if i not in pending]
    if missing:
        raise DomainError(f"steering {', '.join(missing)} is not pending on session {session.id}")


def first_kept_after(session: Session, turn_ids: list[UUID]) -> UUID | None:
    """The first turn a compaction of `turn_ids` keeps (None: it covers the whole branch). Only the
    oldest turns of the branch are compacted, never the running one."""
    if session.active_turn_id is not None and session.active_turn_id in turn_ids:
        raise DomainError(f"session {session.id}: the running turn cannot be compacted")
    if not turn_ids:
        raise DomainError(f"session {session.id}: nothing to compact")
    if session.head[: len(turn_ids)] != list(turn_ids):
        raise DomainError(f"session {session.id}: compacted turns must be the oldest turns on the branch")
    return session.head[len(turn_ids)] if len(session.head) > len(turn_ids) else None
