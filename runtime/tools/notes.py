"""The shared-notes tools (seed 004): list_notes, read_note, write_note, delete_note.

An agent has them when its tools name them (`tools = ["read_file", "list_notes", "read_note", "write_note"]`);
having `list_notes` also adds `<notes_protocol>` to its system prompt (runtime/app/specs.py). They act on the
delegation tree's board (runtime/notes.py) through the running loop's store. The readers are answered from the
record by replay (`reads_store`): the board they read is the one that stood then, not the one there now.
"""

from __future__ import annotations

import json
from uuid import UUID

from pydantic import BaseModel, Field

from chronicle.domain.notes import MAX_TEXT, NoteRefused, check_name

from .base import Tool, ToolContext, ToolError, ToolOutput


def _io(ctx: ToolContext, name: str):  # type: ignore[no-untyped-def]
    if ctx.io is None:
        raise ToolError(f"{name} needs the running agent loop")
    return ctx.io


class ListNotes(Tool):
    name = "list_notes"
    description = ("List the shared notes of your team of agents (you, the agent that delegated to you, and the agents "
                   "you delegate to): each note's name, size, and which session wrote it last. read_note reads one.")
    read_only = idempotent = parallel_safe = True
    reads_store = True

    class Input(BaseModel):
        pass

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        from ..notes import board_of, read_board

        io = _io(ctx, self.name)
        board = read_board(io.store, board_of(io.store, io.store.session(UUID(ctx.session_id))))
        notes = [{"name": name, "characters": len(note["text"]), "written_by_session": str(note["session_id"]),
                  "written_at": note["at"].isoformat()} for name, note in sorted((board.notes if board else {}).items())]
        return ToolOutput(json.dumps({"notes": notes}, ensure_ascii=False))


class ReadNote(Tool):
    name = "read_note"
    description = "Read one shared note by its name (list_notes shows the names)."
    read_only = idempotent = parallel_safe = True
    reads_store = True

    class Input(BaseModel):
        name: str = Field(description="The note's name")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        from ..notes import board_of, read_board

        io = _io(ctx, self.name)
        board = read_board(io.store, board_of(io.store, io.store.session(UUID(ctx.session_id))))
        note = board.notes.get(args.name) if board else None
        if note is None:
            raise ToolError(f"no note named {args.name!r}; list_notes shows them")
        return ToolOutput(note["text"])


class WriteNote(Tool):
    name = "write_note"
    description = (f"Write a shared note for your team of agents to read later (up to {MAX_TEXT:,} characters): a finding, "
                   "a plan, a decision. Writing to an existing name replaces it, or adds to its end with append.")
    parallel_safe = True

    class Input(BaseModel):
        name: str = Field(description="The note's name: letters, digits, '-', '_', '.', '/' (e.g. plan or findings/api)")
        text: str = Field(description="What the note says")
        append: bool = Field(False, description="Add the text to the end of the note instead of replacing it")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        from ..notes import change_board

        io = _io(ctx, self.name)
        session = io.store.session(UUID(ctx.session_id))
        call = UUID(ctx.tool_call_id) if ctx.tool_call_id else None

        def write(board) -> None:  # type: ignore[no-untyped-def]
            old = board.notes.get(args.name, {}).get("text", "") if args.append else ""
            joined = f"{old}\n{args.text}" if old else args.text
            board.write(args.name, joined, session.id, call, io.clock.now())

        try:
            check_name(args.name)
            board = change_board(io.store, session, write, io.clock.now())
        except NoteRefused as exc:
            raise ToolError(str(exc)) from None
        size = len(board.notes[args.name]["text"])
        return ToolOutput(f"note {args.name!r} {'extended' if args.append else 'written'}: {size:,} characters")


class DeleteNote(Tool):
    name = "delete_note"
    description = "Delete a shared note by its name."

    class Input(BaseModel):
        name: str = Field(description="The note's name")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        from ..notes import change_board

        io = _io(ctx, self.name)
        session = io.store.session(UUID(ctx.session_id))
        call = UUID(ctx.tool_call_id) if ctx.tool_call_id else None
        try:
            change_board(io.store, session, lambda board: board.delete(args.name, session.id, call, io.clock.now()),
                         io.clock.now())
        except NoteRefused as exc:
            raise ToolError(str(exc)) from None
        return ToolOutput(f"note {args.name!r} deleted")


NOTES_TOOLS: dict[str, type[Tool]] = {cls.name: cls for cls in (ListNotes, ReadNote, WriteNote, DeleteNote)}

#: Seed 004's `<notes_protocol>`: what the notes are for, given to an agent whose tools include list_notes. It names
#: no note and preloads none: the agent reads what it needs.
NOTES_PROTOCOL = (
    "<notes_protocol>\n"
    "You share notes with the other agents of your team: the agent that delegated to you and those you delegate to. "
    "Notes outlast this conversation and are how you leave each other findings, plans and decisions.\n"
    "- Before you start, list_notes: another agent may have written what you need.\n"
    "- When you learn something another agent will need, write_note it under a clear name; append to add to a note.\n"
    "- Keep a note short and factual, and say where the evidence is (a file, a command).\n"
    "</notes_protocol>"
)


def notes_protocol(tools: tuple[str, ...] | list[str]) -> str:
    """The section for an agent with these tools: the protocol when list_notes is among them, else nothing."""
    return NOTES_PROTOCOL if ListNotes.name in tools else ""
