"""Shared notes (seed 004): a board of named notes the agents of one delegation tree read and write.

A delegated child starts with only its task and the context its parent gave; notes are how the agents of
a tree leave each other durable findings (a plan, what was tried, a decision) without routing them
through every prompt. One board per tree, on the tree's top-level session (`notes_board_id`), opened by
its first write. Each write records the whole new text and who wrote it (the session and the tool call),
so the log says which agent said what, when; `forget` erases the board with the tree it belongs to
(the board's first event names the session, which places it in that tree).

Notes are not part of a branch: like a file `bash` wrote, a note an undone turn wrote stays (the log
and `chronicle notes` show who wrote each one). A fork is a new top-level session with a board of its own,
which starts with the notes of the tree it was forked from as they stood when the fork's last inherited turn
ended (`Inherited`, saved with the fork): the turns the fork's model reads speak of those notes, so it must
be able to read them. From there the two boards go their own ways.
"""
from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .errors import DomainError
from .event_type import EventType

if TYPE_CHECKING:  # the shapes are resolved by the vocabulary (runtime/vocabulary.py); decoding builds none
    from .agent_spec import AgentSpec
    from .payloads import InheritedNote

#: A note's name: what `read_note` and `write_note` take (letters, digits, `-`, `_`, `.`, `/`).
NAME_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./")
MAX_NAME = 100
#: Characters per note and notes per board: a note is a finding, not a file store (the workspace is that).
MAX_TEXT = 32_000
MAX_NOTES = 200
#: The tools that act on a board (runtime/tools/notes.py): a tree none of whose agents has one never has notes.
TOOL_NAMES = frozenset({"list_notes", "read_note", "write_note", "delete_note"})


class NoteRefused(DomainError):
    """A write the board cannot take (a bad name, too long, too many notes): said to the model as its tool's error."""


def check_name(name: str) -> str:
    if not name or len(name) > MAX_NAME or not set(name) <= NAME_CHARS:
        raise NoteRefused(f"a note's name is 1 to {MAX_NAME} letters, digits, '-', '_', '.' or '/', got {name!r}")
    return name


def shares_notes(spec: AgentSpec) -> bool:
    """Whether a session of this spec, or a sub-agent it may delegate to, has a notes tool: when neither has, its
    tree never has a board, and a fork of it need not look for one (`fork` is a benchmarked command)."""
    for agent in (spec, *spec.registry):
        if TOOL_NAMES.intersection(agent.tools) or any(TOOL_NAMES.intersection(n) for n in agent.import_tools.values()):
            return True
    return False


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

    def inherit(self, notes: dict[str, dict[str, Any]], from_session_id: UUID, turn: int, now: datetime) -> None:
        """Start a fork's board with `notes` (name -> {"text", "session_id", "tool_call_id", "at"}, as `notes` holds
        them), those of the board of session `from_session_id`'s tree when its turn `turn` ended. Only a board just
        opened inherits: a board with a history of its own would have it overwritten."""
        if self.version != 1 or self.notes:
            raise DomainError("only a board just opened inherits notes")
        rows: list[Any] = [  # InheritedNote each (its `__pydantic_config__` reads as a key to mypy)
            {"name": name, "text": note["text"], "session_id": note["session_id"], "tool_call_id": note["tool_call_id"],
             "written_at": note["at"]} for name, note in sorted(notes.items())
        ]
        self._inherited(notes=rows, from_session_id=from_session_id, turn=turn, timestamp=now)

    class Inherited(Event):
        """The notes a fork's board starts with, each as last written where it came from (writer and time kept), and
        where they came from: the session forked and the turn (numbered as `history --at` numbers it)."""

        notes: list[InheritedNote]
        from_session_id: UUID
        turn: int

    @event(Inherited)
    def _inherited(self, notes: list[InheritedNote], from_session_id: UUID, turn: int, timestamp: datetime) -> None:
        for note in notes:
            self.notes[note["name"]] = {"text": note["text"], "session_id": note["session_id"],
                                        "tool_call_id": note["tool_call_id"], "at": note["written_at"]}
