"""`chronicle tasks SESSION`: the task board of a session's delegations, read from the task aggregates."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from chronicle.runtime.task_board import task_row, tasks_of

from .common import (
    DbOption,
    JsonOption,
    out_console,
    print_json_rows,
    store_command,
)
from .render import short
from .tables import Column, fit_table

STATUS_STYLE = {"completed": "green", "failed": "red", "in_progress": "yellow", "pending": "dim"}


def tasks(
    session: Annotated[str, typer.Argument(help="The delegating session (id or unique prefix)")],
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """The tasks a session delegated to sub-agents, each pending, in_progress, completed or failed, with the child session that works on it. A failed task's reflection is shown by `chronicle audit` and offered to later delegations of similar tasks."""
    with store_command(db, create=False) as store:
        sid = store.resolve_session_id(session)
        rows = [task_row(t) for t in tasks_of(store, store.session(sid))]
        if as_json:
            print_json_rows(rows)
            return
        if not rows:
            out_console.print(f"session {sid} delegated no tasks")
            return
        columns = [Column("task"), Column("agent"), Column("status"), Column("child"), Column("summary", flex=True)]
        table = [
            {
                "task": r["task_id"][:8], "agent": escape(r["agent"]), "child": r["child_session_id"][:8],
                "status": f"[{STATUS_STYLE.get(r['status'], '')}]{r['status']}[/]",
                "summary": escape(short(r["summary"] or r["task"], 200)),
            }
            for r in rows
        ]
        out_console.print(fit_table(columns, table, out_console.width))
