"""Time travel from code: undo a turn and the file it changed, redo it, fork, and replay.

    python examples/time_travel.py

Every file change a tool makes is recorded with its before and after, so `undo(files=True)`
puts the workspace back as well as the conversation. A fork starts a new session from any
turn; the original stays as it was. `replay` runs the session again against its recorded model
answers and says whether the code still behaves exactly the same.
"""

from __future__ import annotations

from _setup import provider, workspace

from chronicle import Agent, Chronicle

writer = Agent(name="writer", instructions="You keep notes in notes.md.", tools=["read_file", "write_file", "edit_file"],
               provider=provider("time_travel.json"))


def main() -> None:
    ws = workspace()
    notes = ws / "notes.md"
    app = Chronicle()
    first = app.run_sync(writer, "Start notes.md with a title.", workspace=ws)
    sid = first.session_id
    app.run_sync(writer, "Add a line about undo.", session=sid)
    print(f"after two turns: {notes.read_text()!r}")

    undone = app.undo(sid, turns=1, files=True)
    print(f"undo: {len(undone['undone'])} turn(s), files {undone['files']}; now {notes.read_text()!r}")
    app.redo(sid)
    print(f"history after redo: {len(app.history(sid))} message(s)")

    # A fork's own turns are numbered after the ones it inherits: this one is turn 2, so the
    # scripted writer answers it with its turn-2 entry (a real model would read the fork's context).
    fork_id = app.fork(sid, at=1)
    forked = app.run_sync(writer, "Add the line about undo again, on a branch of its own.", session=fork_id)
    print(f"fork {fork_id[:8]}: {forked.text} {len(app.history(fork_id))} message(s), notes.md {notes.read_text()!r}")
    print(f"the original still has {len(app.history(sid))} message(s)")

    verdict = app.replay(sid)
    print(f"replay: {verdict['verdict']}")
    app.close()


if __name__ == "__main__":
    main()
