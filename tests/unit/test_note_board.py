"""The NoteBoard as given events → expected events: a fork's board inherits once, as it opens; and which specs can
have notes at all (a fork of a tree that cannot reads no board)."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.errors import DomainError
from chronicle.domain.notes import TOOL_NAMES, NoteBoard, shares_notes
from chronicle.runtime.stored_vocabulary import stored_vocabulary
from chronicle.runtime.tools.notes import NOTES_TOOLS

NOW = datetime(2026, 1, 5, tzinfo=UTC)


def names(board: NoteBoard) -> list[str]:
    return [type(e).__qualname__ for e in board.collect_events()]


def test_a_fork_s_board_inherits_the_notes_with_their_writers_once_as_it_opens():
    parent, writer, call = uuid4(), uuid4(), uuid4()
    source = NoteBoard(id=uuid4(), session_id=parent, timestamp=NOW)
    source.write("plan", "v1", writer, call, NOW)
    board = NoteBoard(id=uuid4(), session_id=uuid4(), timestamp=NOW)
    board.inherit(source.notes, parent, 3, NOW)
    events = board.collect_events()
    assert [type(e).__qualname__ for e in events] == ["NoteBoard.Opened", "NoteBoard.Inherited"]
    assert board.notes == source.notes
    inherited = events[1]
    assert (inherited.from_session_id, inherited.turn) == (parent, 3)  # type: ignore[attr-defined]
    assert inherited.notes == [{"name": "plan", "text": "v1", "session_id": writer, "tool_call_id": call,  # type: ignore[attr-defined]
                                "written_at": NOW}]
    assert stored_vocabulary().check("chronicle.domain.notes:NoteBoard.Inherited", inherited) is None
    with pytest.raises(DomainError):
        board.inherit(source.notes, parent, 3, NOW)  # a board with notes of its own is never overwritten
    written = NoteBoard(id=uuid4(), session_id=uuid4(), timestamp=NOW)
    written.write("mine", "x", writer, None, NOW)
    with pytest.raises(DomainError):
        written.inherit(source.notes, parent, 1, NOW)
    assert names(written) == ["NoteBoard.Opened", "NoteBoard.Written"]


def test_a_spec_shares_notes_when_it_or_a_sub_agent_it_may_delegate_to_has_a_notes_tool():
    assert TOOL_NAMES == set(NOTES_TOOLS)
    assert not shares_notes(AgentSpec(tools=("read_file", "bash")))
    assert not shares_notes(AgentSpec(tools=("read_file",), registry=(AgentSpec(name="r", tools=("grep",)),)))
    assert shares_notes(AgentSpec(tools=("read_file", "list_notes")))
    assert shares_notes(AgentSpec(tools=("read_file",), registry=(AgentSpec(name="r", tools=("write_note",)),)))
    assert shares_notes(AgentSpec(tools=("shop:TOOLS",), import_tools={"shop:TOOLS": ("lookup", "read_note")}))
