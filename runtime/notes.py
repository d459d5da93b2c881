"""A delegation tree's shared notes (domain/notes.py): found from any of its sessions, read and written.

The board belongs to the tree's top-level session, so a sub-agent at any depth and its parent read and write
the same one. Writes come from tool calls of sessions whose turns run concurrently (a parent's, its children's),
so each is applied to a fresh copy and retried on a version conflict, as `update_session` does for sessions.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Callable
from uuid import UUID

from eventsourcing.persistence import IntegrityError

from chronicle.domain.ids import notes_board_id
from chronicle.domain.notes import NoteBoard
from chronicle.domain.session import Session

from .agents.tree import lineage
from .store import ChronicleStore, ForgottenSession, NotFound

#: Tries at a write that keeps meeting another writer's.
ATTEMPTS = 20


def board_of(store: ChronicleStore, session: Session) -> UUID:
    """The id of the board `session`'s tree shares (its top-level session's)."""
    return notes_board_id(lineage(store, session)[0].id)


def read_board(store: ChronicleStore, board_id: UUID) -> NoteBoard | None:
    """The board as it is now (a copy the caller may change); None before its first write. Read as the store reads
    its other aggregates, so an erased tree's board is ForgottenSession and a damaged row names itself."""
    try:
        board: NoteBoard = store._get(board_id, NoteBoard)
    except ForgottenSession:
        raise  # a NotFound too, but erased on purpose: not "no notes"
    except NotFound:
        return None
    return board


def change_board(store: ChronicleStore, session: Session, change: Callable[[NoteBoard], None], now: datetime) -> NoteBoard:
    """Apply `change` to the tree's board (opened by its first write) and save it; NoteRefused passes through."""
    board_id = board_of(store, session)
    top = lineage(store, session)[0].id
    for _ in range(ATTEMPTS):
        board = read_board(store, board_id) or NoteBoard(id=board_id, session_id=top, timestamp=now)
        change(board)
        try:
            store.save(board)
            return board
        except IntegrityError:
            continue  # another agent of the tree wrote meanwhile: apply the change to what it left
    raise RuntimeError(f"the notes of session {top} kept changing under {ATTEMPTS} attempts to write them")


def note_rows(store: ChronicleStore, session_id: UUID) -> list[dict[str, Any]]:
    """`chronicle notes SESSION --json`: each note of the session's tree, by name."""
    board = read_board(store, board_of(store, store.session(session_id)))
    if board is None:
        return []
    return [
        {"name": name, "text": note["text"], "session_id": str(note["session_id"]),
         "tool_call_id": str(note["tool_call_id"]) if note["tool_call_id"] else None, "written_at": note["at"].isoformat()}
        for name, note in sorted(board.notes.items())
    ]
