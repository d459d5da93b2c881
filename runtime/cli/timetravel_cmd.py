"""Time travel from the command line: undo, redo, fork, replay.

Nothing is ever deleted: undo and redo are events that move turns off and back onto the
active branch, a fork references its parent's turns, and a replay runs in a throwaway store.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
from rich.markup import escape

from .common import (
    DbOption,
    JsonOption,
    WorkspaceOption,
    cli_errors,
    err_console,
    fail,
    open_store,
    out_console,
    pasted,
    print_json,
    store_command,
)
from .lazy import lazy_module
from .render import printable

if TYPE_CHECKING:  # the use cases import the loop, pydantic and the store; `--help` needs none of them
    from chronicle.runtime.app import timetravel as app_timetravel
else:
    app_timetravel = lazy_module("chronicle.runtime.app.timetravel")

SessionArg = Annotated[str, typer.Argument(help="Session id or unique prefix")]
#: undo/redo --files act on the workspace the session recorded, unless told otherwise.
FilesWorkspaceOption = Annotated[Optional[Path], typer.Option(
    "--workspace", help="Where --files acts (default: the workspace the session recorded)", show_default=False)]


def undo(
    session: SessionArg,
    turns: Annotated[int, typer.Option("--turns", min=1, help="How many turns to take off the active branch")] = 1,
    files: Annotated[bool, typer.Option("--files", help="Also put back the workspace files those turns changed")] = False,
    workspace: FilesWorkspaceOption = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Take the last turns off the active branch (they stay in `log`); `redo` puts them back."""
    with store_command(db, create=False) as store:
        result = app_timetravel.undo(store, session, turns, files=files, workspace=workspace)
        sid, restored = result.session_id, result.files
        if files:
            ran = effects_of(store, result.turn_ids, {"bash"})
            if ran:
                err_console.print(f"note: {ran} `bash` command(s) those turns ran are not reverted; --files puts back only "
                                  "what file tools wrote", soft_wrap=True)
            mcp_note(store, result.turn_ids, "not reverted")
        finished_note(result.finished)
        if as_json:
            print_json(result.row())
        else:
            redo_hint = pasted(f"redo {sid}" + (" --files" if files else ""), store.url)  # and the files, when they were undone
            what = "them and their files" if files else "them"
            out_console.print(f"undid {len(result.turn_ids)} turn(s) of session {sid}; `{redo_hint}` puts {what} back", soft_wrap=True)
            for item in restored:
                out_console.print(f"  {item['action']}: {escape(printable(item['path']))}")  # a name the model chose
        fail_refused("undo", sid, result.refused, store.url)


def redo(
    session: SessionArg,
    files: Annotated[bool, typer.Option("--files", help="Also put back the workspace files those turns wrote, as they left them")] = False,
    workspace: FilesWorkspaceOption = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Put the most recently undone turns back on the active branch (with --files, their files too)."""
    with store_command(db, create=False) as store:
        result = app_timetravel.redo(store, session, files=files, workspace=workspace)
        sid = result.session_id
        if files:
            ran = effects_of(store, result.turn_ids, {"bash"})
            if ran:
                err_console.print(f"note: {ran} `bash` command(s) those turns ran are not re-run; --files puts back only "
                                  "what file tools wrote", soft_wrap=True)
            mcp_note(store, result.turn_ids, "not re-run")
        if result.warning:
            err_console.print(f"warning: {escape(printable(result.warning))}", soft_wrap=True)
        finished_note(result.finished)
        if as_json:
            print_json(result.row())
        else:
            out_console.print(f"redid {len(result.turn_ids)} turn(s) of session {sid}")
            for item in result.files or []:
                out_console.print(f"  {item['action']}: {escape(printable(item['path']))}")  # a name the model chose
        fail_refused("redo", sid, result.refused, store.url)


def fork(
    session: SessionArg,
    at: Annotated[Optional[int], typer.Option(
        "--at", min=1, show_default=False,
        help="The new session continues from the end of this turn (from 1, as `history --at` counts) "
             "(default: the last turn on the active branch, as the library's Chronicle.fork does)")] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Start a new session from the conversation as it was when a turn had completed (--at; default: the end of the active branch); prints its id."""
    with cli_errors():
        store = open_store(db, create=False)
        child = app_timetravel.fork(store, session, at)
        if (note := app_timetravel.undone_note(store, child)) is not None:
            err_console.print(f"note: {escape(note)}", soft_wrap=True)
        if as_json:
            print_json({"session_id": str(child.id), "forked_from": child.forked_from})
            return
        print(child.id)


def replay(
    session: SessionArg,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Run the session's active branch again against its recorded model responses; exit 1 at the first divergence (kind `earlier release` when a request an earlier release recorded cannot be rebuilt)."""
    with store_command(db, create=False) as store:
        sid = store.resolve_session_id(session)
        report = asyncio.run(app_timetravel.replay(store, sid, workspace))
        if as_json:
            print_json(app_timetravel.replay_row(sid, report))
        else:
            out_console.print(report.verdict(), markup=False, soft_wrap=True)  # a divergence names what the model chose
        raise typer.Exit(report.exit_code)


def finished_note(finished: str | None) -> None:
    """What finishing an interrupted undo/redo --files did before this one."""
    if finished:
        err_console.print(f"note: {escape(printable(finished))}", soft_wrap=True)


def fail_refused(command: str, sid: Any, refused: list[str], url: str) -> None:
    """Files left as they are because they changed since they were checked: the rest were written and all of it is
    recorded, but a script must not read exit 0 as "the workspace is as asked". Exit 1, as a refused undo/redo
    --files exits (the library warns with the same line)."""
    line = app_timetravel.refused_line(command, sid, refused, url)
    if line is not None:
        fail(line, 1)


#: Tools whose file effects `undo --files` puts back.
FILE_TOOLS = frozenset({"write_file", "edit_file"})


def effects_of(store: Any, turn_ids: Any, names: set[str] | frozenset[str]) -> int:
    """How many calls of these tools the turns ran (what undo/redo --files does not revert or re-run): those of the
    sub-agents their delegate calls started included, and only calls that started (one denied, or cancelled while it
    awaited approval, never ran)."""
    from chronicle.runtime.undo_redo import calls_of_turns

    return sum(1 for _, call in calls_of_turns(store, list(turn_ids)) if call.name in names and call.attempts > 0)


def mcp_effects(store: Any, turn_ids: Any) -> dict[str, int]:
    """The MCP tools the turns called that the session does not hold read-only, and how many times: what they did
    happened on their server, which neither undo nor redo --files reaches. A sub-agent's calls count (each read
    against its own session's MCP tools)."""
    from chronicle.runtime.undo_redo import calls_of_turns

    counts: dict[str, int] = {}
    mcp_of: dict[Any, set[str]] = {}
    for _, call in calls_of_turns(store, list(turn_ids)):
        if call.session_id not in mcp_of:
            mcp_of[call.session_id] = {entry["name"] for entry in store.session(call.session_id).spec.mcp_tools}
        if call.name in mcp_of[call.session_id] and not call.flags.get("read_only") and call.attempts > 0:
            counts[call.name] = counts.get(call.name, 0) + 1
    return counts


def mcp_note(store: Any, turn_ids: Any, what: str) -> None:
    called = mcp_effects(store, turn_ids)
    if called:
        names = ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in sorted(called.items()))
        err_console.print(f"note: {sum(called.values())} MCP tool call(s) not marked read-only those turns made are {what} "
                          f"({escape(printable(names))}); --files puts back only what file tools wrote", soft_wrap=True)
