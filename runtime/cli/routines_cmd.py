"""`chronicle routines list|run|history`: the workspace's routines, a manual run, and every firing."""

from __future__ import annotations

import asyncio
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from .common import (
    ConfigWorkspaceOption,
    DbOption,
    JsonOption,
    WorkspaceOption,
    err_console,
    hint,
    open_store,
    out_console,
    print_json,
    print_json_rows,
    workspace_command,
)
from .lazy import lazy_module
from .render import short
from .tables import Column, fit_table

if TYPE_CHECKING:  # the use cases import the loop, pydantic and the store; `--help` needs none of them
    from chronicle.runtime.app import routines
else:
    routines = lazy_module("chronicle.runtime.app.routines")

app = typer.Typer(help="Routines: prompts run on a schedule, on an event or by hand, declared as routines.NAME tables in chronicle.toml.",
                  no_args_is_help=True)

EXIT = {"completed": 0, "queued": 0, "running": 0, "failed": 1, "skipped": 4}


@app.command("list")
def list_routines(workspace: ConfigWorkspaceOption = None, as_json: JsonOption = False) -> None:
    """The routines in the workspace's chronicle.toml: `name`, `trigger`, `action`, `next_due` (cron only)."""
    with workspace_command(workspace) as ws:
        rows = routines.listing(ws)
        if as_json:
            print_json_rows(rows)
            return
        if not rows:
            out_console.print(f"no routines in {escape(str(ws / 'chronicle.toml'))}: add a \\[routines.NAME] table")
            return
        notifying = any(r["notify"] for r in rows)
        columns = [Column("name"), Column("trigger"), Column("action"), Column("next_due"),
                   *([Column("notify")] if notifying else []), Column("prompt", flex=True)]
        table = [{"name": escape(r["name"]), "trigger": escape(r["trigger"]), "action": r["action"],
                  "next_due": (r["next_due"] or "")[:19].replace("T", " "), "notify": escape(r["notify"] or ""),
                  "prompt": escape(short(r["prompt"] or "(HEARTBEAT.md)", 120))}
                 for r in rows]
        out_console.print(fit_table(columns, table, out_console.width))
        if notifying:
            _serve_note(ws)


def _serve_note(ws: Path, db: str | None = None) -> None:
    """Routines fire in `worker`/`routines run`, but only a `serve` of their workspace posts what they found:
    said where a notifying routine is shown, since nothing else tells that none is running."""
    out_console.print(f"[dim]notify: findings are posted by `{hint(f'serve --workspace {shlex.quote(str(ws))}', db)}`; "
                      "until one runs they wait in the log[/]", soft_wrap=True)


@app.command("run")
def run_routine(
    name: Annotated[str, typer.Argument(help="The routine (a \\[routines.NAME] table)")],
    provider: Annotated[
        str | None, typer.Option("--provider", help="anthropic | openai-compatible | scripted:PATH (default: anthropic when ANTHROPIC_API_KEY is set)")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model for the routine's session")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve tools that require approval without asking")] = False,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Fire the routine now, guardrails applied. A lightweight routine runs here, in its own session; a job is queued as a new session for a worker. JSON: `routine`, `session_id`, `status` (completed, failed, queued, skipped with the guardrail's `reason`). Exit 0 completed or queued, 1 failed, 4 skipped by a guardrail."""  # noqa: E501
    with workspace_command(workspace) as ws:
        routines.find(ws, name)  # an unknown routine is exit 2 before the store is opened
        store = open_store(db)
        row = asyncio.run(routines.run(store, ws, name, provider=provider, model=model, auto_approve=yes))
        note = routines.unused_approval(row, yes)
        if note:
            err_console.print(f"[dim]{escape(note)}[/]", soft_wrap=True)
        if as_json:
            print_json(row)
        else:
            detail = row["reason"] or row["summary"] or ""
            out_console.print(f"routine {escape(name)}: {row['status']}" + (f" — {escape(short(detail, 300))}" if detail else ""), soft_wrap=True)
            if row["session_id"]:
                anew = f" (new: the routine's session {row['replaces_session_id']} was erased)" if row.get("replaces_session_id") else ""
                out_console.print(f"session {row['session_id']}{anew}", soft_wrap=True)
            if row.get("notify"):
                _serve_note(ws, db)
        raise typer.Exit(EXIT.get(row["status"], 1))


@app.command("history")
def history(
    routine: Annotated[str | None, typer.Option("--routine", help="Only this routine")] = None,
    workspace: ConfigWorkspaceOption = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Every firing of the workspace's routines, oldest first: `routine`, `run_id`, `session_id`, `status` (queued, running, completed, failed, skipped, or erased by `chronicle forget` with its session: then only the ids, `fired_at` and `erased_at` are left), `trigger`, `due`, `action`, `fired_at`, `holder`, `reason`, `summary`, `usd`, `notify`, `replaces_session_id` (a lightweight routine's erased session this run started anew), `erased_at`."""  # noqa: E501
    with workspace_command(workspace) as ws:
        store = open_store(db, create=False)
        rows = routines.history(store, ws, routine)
        if not rows and routine is not None:
            routines.find(ws, routine)  # a name no routine has is exit 2 listing them (a removed one keeps its history)
        if as_json:
            print_json_rows(rows)
            return
        if not rows and routine is not None:
            out_console.print(f"routine {escape(routine)} has not fired yet")
            return
        if not rows:
            out_console.print("no routine has fired yet")
            return
        columns = [Column("fired_at"), Column("routine"), Column("due"), Column("status"), Column("session", optional=True),
                   Column("detail", flex=True)]
        table = [{"fired_at": r["fired_at"][:19].replace("T", " "), "routine": escape(r["routine"]), "due": escape(r["due"] or ""),
                  "status": r["status"], "session": (r["session_id"] or "")[:8],
                  "detail": escape(short(_detail(r), 160))} for r in rows]
        out_console.print(fit_table(columns, table, out_console.width))


def _detail(row: dict[str, Any]) -> str:
    """The guardrail's reason, the erasure, or the findings; said first when the run started the routine's session anew."""
    said = row["reason"] or row["summary"] or ""
    if row.get("replaces_session_id"):
        new = f"new session: {row['replaces_session_id'][:8]} was erased"
        return f"{new}; {said}" if said else new
    return said
