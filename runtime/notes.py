"""A delegation tree's shared notes (domain/notes.py): found from any of its sessions, read and written.

The board belongs to the tree's top-level session, so a sub-agent at any depth and its parent read and write
the same one. Writes come from tool calls of sessions whose turns run concurrently (a parent's, its children's),
so each is applied to a fresh copy and retried on a version conflict, as `update_session` does for sessions.

The notes as they stood when a turn ended (`notes --at`, and what a fork starts with) are the board's events
committed up to that turn's `TurnEnded`: a sub-agent runs inside the delegate call of its parent's turn, so its
writes come before that turn ends and count as that turn's. A turn a fork inherited ended in the session it was
forked from (or further up), so it is looked for there; the fork's own board holds the notes of its last
inherited turn (`NoteBoard.Inherited`), which answers for that turn even where the origin is not in the store.
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
from .store_snapshots import apply_event
from .timetravel import Cut, TimeTravelError, cut_at_turn

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


def board_as_of(store: ChronicleStore, board_id: UUID, position: int) -> NoteBoard | None:
    """The board as it stood at log position `position` (None if not opened by then): its events committed up to
    there, replayed. One query; a board takes no snapshots, and its events are a few short ones per note."""
    board: NoteBoard | None = None
    for _, event in store.events_with_positions([board_id], positions=(0, position)):
        board = apply_event(board, event)
    return board


def notes_at_turn(store: ChronicleStore, session_id: UUID, number: int, cut: Cut | None = None) -> NoteBoard | None:
    """The notes of the session's tree as they stood when its turn `number` (as `history --at` counts) ended.

    `cut`: `cut_at_turn(store, session_id, number)` when the caller has it (a fork). A turn that does not exist or
    has not ended is refused as `history --at` refuses it (MomentOutOfRange, TimeTravelError)."""
    cut = cut if cut is not None else cut_at_turn(store, session_id, number)
    if cut.timestamp is not None:  # one of the session's own turns: its TurnEnded is the cut
        return board_as_of(store, board_of(store, cut.session), cut.position)
    return _inherited_turn_notes(store, cut.session, number)


def _inherited_turn_notes(store: ChronicleStore, start: Session, number: int) -> NoteBoard | None:
    """Notes at a fork's inherited turn `number` (`start`: the fork as it began, its head cut to that turn)."""
    if number == len(store.first_head(start.id)):
        # What the fork started with: recorded with it, so it answers even where its origin is not in the store.
        rows = list(store.events_with_positions([notes_board_id(start.id)], limit=2))
        if len(rows) == 2 and isinstance(rows[1][1], NoteBoard.Inherited):
            return board_as_of(store, notes_board_id(start.id), rows[1][0])
    turn_id = start.head[-1]
    origin = start.forked_from or {}
    while origin.get("session_id"):
        owner_id = UUID(str(origin["session_id"]))
        try:
            owner = store.session(owner_id, version=1)
        except NotFound:
            raise TimeTravelError(f"turn {number} of session {start.id} ran in session {owner_id}, which is not in "
                                  "this store: the notes as they stood then are not known here") from None
        if turn_id not in owner.head:  # the owner ran it: the notes of its tree as that turn ended
            for position, ended in store.events_with_positions([owner_id], topic_suffix=".TurnEnded"):
                if getattr(ended, "turn_id", None) == turn_id:
                    return board_as_of(store, board_of(store, owner), position)
            raise TimeTravelError(f"turn {number} of session {start.id} has no end recorded in session {owner_id}")
        origin = owner.forked_from or {}
    raise TimeTravelError(f"turn {number} of session {start.id} was not found in the sessions it was forked from")


def inherited_board(store: ChronicleStore, session_id: UUID, number: int, fork_id: UUID, now: datetime,
                    cut: Cut | None = None) -> NoteBoard | None:
    """The board a fork of session `session_id` at its turn `number` starts with: the notes of its tree as they
    stood when that turn ended (`Inherited`), to be saved with the fork; None when there were none. The parent's
    board is only read. A past that cannot be read (a turn that ran in a session not in this store) gives none:
    the fork goes ahead, as it did before forks inherited notes."""
    try:
        source = notes_at_turn(store, session_id, number, cut)
    except TimeTravelError:
        return None
    if source is None or not source.notes:
        return None
    board = NoteBoard(id=notes_board_id(fork_id), session_id=fork_id, timestamp=now)
    board.inherit(source.notes, session_id, number, now)
    return board


def note_rows(store: ChronicleStore, session_id: UUID, at: int | None = None) -> list[dict[str, Any]]:
    """`chronicle notes SESSION [--at TURN] --json`: each note of the session's tree, by name; with `at`, as they stood
    when turn `at` ended (TimeTravelError for a turn that does not exist or has not ended)."""
    if at is None:
        board = read_board(store, board_of(store, store.session(session_id)))
    else:
        board = notes_at_turn(store, session_id, at)
    if board is None:
        return []
    return [
        {"name": name, "text": note["text"], "session_id": str(note["session_id"]),
         "tool_call_id": str(note["tool_call_id"]) if note["tool_call_id"] else None, "written_at": note["at"].isoformat()}
        for name, note in sorted(board.notes.items())
    ]
