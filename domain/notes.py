"""Shared notes (seed 004): a board of named notes the agents of one delegation tree read and write.

A delegated child starts with only its task and the context its parent gave; notes are how the agents of
a tree leave each other durable findings (a plan, what was tried, a decision) without routing them
through every prompt. One board per tree, on the tree's top-level session (`notes_board_id`), opened by
its first write. Each write records the whole new text and who wrote it (the session and the tool call),
so the log says which agent said what, when; `forget` erases the board with the tree it belongs to
(the board's first event names the session, which places it in that tree).

Notes are not part of a branch: like a file `bash` wrote, a note an undone turn wrote stays (the log
and `chronicle notes` show who wrote each one). A fork is a new top-level session with its own board.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .errors import DomainError
from .event_type import EventType

#: A note's name: what `read_note` and `write_note` take (letters, digits, `-`, `_`, `.`, `/`).
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./")
MAX_NAME = 100
#: Characters per note and notes per board: a note is a finding, not a file store (the workspace is that).
MAX_TEXT = 32_000
MAX_NOTES = 200


class NoteRefused(DomainError):
    """A write the board cannot take (a bad name, too long, too many notes): said to the model as its tool's error."""


def check_name(name: str) -> str:
    if not name or len(name) > MAX_NAME or not set(name) <= NAME_CHARS:
        raise NoteRefused(f"a note's name is 1 to {MAX_NAME} letters, digits, '-', '_', '.' or '/', got {name!r}")
    return name


class NoteBoard(Aggregate):
    class Event(Aggregate.Event, metaclass=EventType):
        pass

    class Opened(Aggregate.Created, Event):
        session_id: UUID

    @event(Opened)
    def __init__(self, id: UUID, session_id: UUID, timestamp: datetime) -> None:
        self.session_id = session_id
        #: name -> {"text", "session_id", "tool_call_id", "at"}: each note as last written.
        self.notes: dict[str, dict[str, Any]] = {}

    def write(self, name: str, text: str, session_id: UUID, tool_call_id: UUID | None, now: datetime) -> None:
        check_name(name)
        if len(text) > MAX_TEXT:
            raise NoteRefused(f"note {name!r} would hold {len(text):,} characters; a note holds at most {MAX_TEXT:,} "
                              "(write longer findings to a file in the workspace and note its path)")
        if name not in self.notes and len(self.notes) >= MAX_NOTES:
            raise NoteRefused(f"the board holds {MAX_NOTES} notes already; delete one or write to an existing name")
        self._written(name=name, text=text, session_id=session_id, tool_call_id=tool_call_id, timestamp=now)

    class Written(Event):
        name: str
        text: str
        session_id: UUID
        tool_call_id: UUID | None

    @event(Written)
    def _written(self, name: str, text: str, session_id: UUID, tool_call_id: UUID | None, timestamp: datetime) -> None:
        self.notes[name] = {"text": text, "session_id": session_id, "tool_call_id": tool_call_id, "at": timestamp}

    def delete(self, name: str, session_id: UUID, tool_call_id: UUID | None, now: datetime) -> None:
        if name not in self.notes:
            raise NoteRefused(f"no note named {name!r}; list_notes shows them")
        self._deleted(name=name, session_id=session_id, tool_call_id=tool_call_id, timestamp=now)

    class Deleted(Event):
        name: str
        session_id: UUID
        tool_call_id: UUID | None

    @event(Deleted)
    def _deleted(self, name: str, session_id: UUID, tool_call_id: UUID | None, timestamp: datetime) -> None:
        del self.notes[name]
