"""Import's check that every aggregate a bundle brings is one of the bundle's own sessions'.

Why: the bundle's digests and signature say the events are those its writer put there, not whose they
are. An unsigned bundle (or one signed by anyone's key) can carry a Turn whose `session_id` names a
session the target already holds, under a new turn id: imported, `audit --session`, `cost` and
`history --at` would read it as that session's, a conversation turn nobody had, and `verify` would pass
(it is chained like any write). An import may only add to what the bundle carries, so each aggregate it
writes must belong to one of the manifest's sessions, with one exception that export writes: the turns
and tool calls a fork inherits belong to the session it was forked from, which is not in the bundle;
they are taken only while that session is not in the target either (where it is, they are already
here, the same events, and skipped: runtime/bundle.py `_new_events`).

Every aggregate export writes begins with its creating event (version 1), which names its owner:
Session.Started (the session itself; a sub-agent's parent), Turn.Created and ToolCall.Requested
(`session_id`), DelegatedTask.Opened/Posted (the board's session and the child), NoteBoard.Opened (the
tree's top-level session), Attachment.Created (no session: content-addressed, checked against its
bytes). Derived ids are re-derived where the readers find aggregates by them (a tool call from its
turn, a delegate's task from its child, a notes board from its session, an attachment from its
hash), so a bundle cannot slip an aggregate in under an id a reader of another session would look up.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any, Callable
from uuid import UUID

from chronicle.domain.attachment import Attachment
from chronicle.domain.ids import attachment_id, notes_board_id, task_id, tool_call_id
from chronicle.domain.notes import NoteBoard
from chronicle.domain.session import Session
from chronicle.domain.task_board import DelegatedTask
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn

FORGED = "the bundle was not written by `export`"


class NotTheBundles(ValueError):
    """An aggregate of the bundle that belongs to (or names) a session the bundle does not carry."""


def check_owners(manifest: dict[str, Any], decoded: list[Any], arriving: set[UUID], held: Callable[[UUID], bool]) -> None:
    """NotTheBundles for the first aggregate among `arriving` (those the import would write) that is not the
    bundle's sessions' own. `held(id)`: whether the target holds any event of that aggregate."""
    sessions = [UUID(str(s)) for s in manifest.get("sessions", [])]
    ours = set(sessions)
    inherited = {UUID(str(i)) for i in manifest.get("inherited", [])}
    origins = {UUID(str(s)) for s in manifest.get("inherited_from", [])}
    first: dict[UUID, Any] = {}
    for event in decoded:
        first.setdefault(UUID(str(event.originator_id)), event)
    started = {oid for oid, e in first.items() if isinstance(e, Session.Started)}
    for sid in [*sessions, *(UUID(str(s)) for s in manifest.get("indexed_sessions", []))]:
        if sid not in started:
            raise NotTheBundles(f"the manifest lists session {sid}, whose events the bundle does not carry: {FORGED}")
    turns = {oid: e.session_id for oid, e in first.items() if isinstance(e, Turn.Created)}

    def owned(oid: UUID, sid: UUID, what: str) -> None:
        if sid in ours:
            return
        here = held(sid)
        if oid in inherited and sid in origins and not here:
            return  # a turn (or its call) a fork inherits, from an origin the target does not hold
        where = "which this store holds" if here else "which is not in the bundle"
        raise NotTheBundles(f"{what} {oid} belongs to session {sid}, {where}: a bundle may only add to the sessions it "
                            f"carries ({FORGED})")

    for oid, e in first.items():
        if oid not in arriving:
            continue  # held here already with exactly the bundle's events: nothing is added
        name = type(e).__qualname__
        if e.originator_version != 1:
            raise NotTheBundles(f"aggregate {oid} begins at version {e.originator_version} ({name}) in the bundle: its first "
                                f"events are missing ({FORGED})")
        if isinstance(e, Session.Started):
            if oid not in ours:
                raise NotTheBundles(f"session {oid} is not one of the bundle's sessions: {FORGED}")
            parent = e.parent_session_id
            if parent is not None and parent not in ours and held(parent):
                raise NotTheBundles(f"session {oid} names session {parent} as its parent, which this store holds: a bundle "
                                    "may not add a sub-agent to a session it does not carry")
        elif isinstance(e, Turn.Created):
            owned(oid, e.session_id, "turn")
        elif isinstance(e, ToolCall.Requested):
            owned(oid, e.session_id, "tool call")
            if turns.get(e.turn_id) != e.session_id or oid != tool_call_id(e.turn_id, e.step, e.tool_use_id):
                raise NotTheBundles(f"tool call {oid} does not belong to turn {e.turn_id} of session {e.session_id} "
                                    f"as the bundle carries it: {FORGED}")
        elif isinstance(e, (DelegatedTask.Opened, DelegatedTask.Posted)):
            _task(oid, e, ours, held)
        elif isinstance(e, NoteBoard.Opened):
            if e.session_id not in ours or oid != notes_board_id(e.session_id):
                raise NotTheBundles(f"notes board {oid} is not the board of one of the bundle's sessions "
                                    f"(it names {e.session_id}): {FORGED}")
        elif isinstance(e, Attachment.Created):
            _attachment(oid, e)
        else:
            raise NotTheBundles(f"aggregate {oid} begins with {name}, which is no aggregate `export` writes: {FORGED}")
    for event in decoded:  # later events that name a session: a task claimed for a child, a note written by a session
        oid = UUID(str(event.originator_id))
        named = getattr(event, "child_session_id", None) if isinstance(event, DelegatedTask.ClaimedByChild) else (
            event.session_id if isinstance(event, (NoteBoard.Written, NoteBoard.Deleted)) else None)
        if oid in arriving and named is not None and named not in ours:
            raise NotTheBundles(f"{type(event).__qualname__} of {oid} names session {named}, which is not in the bundle: {FORGED}")


def _task(oid: UUID, e: Any, ours: set[UUID], held: Callable[[UUID], bool]) -> None:
    """A delegate's task is its child's (its id is derived from the child's); it sits on its parent's board, which
    is outside the bundle only for a sub-agent exported alone, whose parent the target must not hold. A posted
    task's board is checked where its board entry is written (runtime/bundle.py `_task_index_events`)."""
    if isinstance(e, DelegatedTask.Opened) and (e.child_session_id not in ours or oid != task_id(e.child_session_id)):
        raise NotTheBundles(f"task {oid} is not the task of one of the bundle's sessions (it names child session "
                            f"{e.child_session_id}): {FORGED}")
    board = e.parent_session_id
    if isinstance(e, DelegatedTask.Opened) and board not in ours and held(board):
        raise NotTheBundles(f"task {oid} is on the board of session {board}, which this store holds: a bundle may not "
                            "add to the board of a session it does not carry")


def _attachment(oid: UUID, e: Any) -> None:
    """Content-addressed: a reader of any session takes the attachment with this id as these bytes."""
    try:
        data = base64.b64decode(e.data, validate=True)
    except (binascii.Error, TypeError, ValueError):
        data = None
    if data is None or hashlib.sha256(data).hexdigest() != e.sha256 or oid != attachment_id(e.sha256):
        raise NotTheBundles(f"attachment {oid} does not hold the bytes its id names: {FORGED}")
