"""`chronicle notes SESSION`: the shared notes of the session's delegation tree (seed 004), as the agents left them."""

from __future__ import annotations

from typing import Annotated, Optional

import typer
from rich.markup import escape

from .common import DbOption, JsonOption, cli_errors, open_store, out_console, print_json_rows


def notes(
    session: Annotated[str, typer.Argument(help="Any session of the tree (id or unique prefix)", show_default=False)],
    at: Annotated[Optional[int], typer.Option(
        "--at", min=1, help="As they stood when turn TURN (from 1, as `history --at` counts) had ended")] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """The shared notes of the session's team of agents (its top-level session and the sub-agents below it), each as last written, with the session that wrote it; their agents read and write them with list_notes, read_note, write_note and delete_note. A fork starts with the notes as they stood at the turn it was forked at."""  # noqa: E501 - one paragraph
    from chronicle.runtime.app.notes import notes_of

    with cli_errors():
        rows = notes_of(open_store(db, create=False), session, at)
    if as_json:
        print_json_rows(rows)
        return
    if not rows:
        out_console.print("no notes yet: an agent whose tools include write_note leaves them")
        return
    for row in rows:
        out_console.print(f"[bold]{escape(row['name'])}[/]  [dim]{row['written_at'][:19].replace('T', ' ')}, "
                          f"session {row['session_id'][:8]}[/]")
        out_console.print(escape(row["text"]), soft_wrap=True)
        out_console.print()
