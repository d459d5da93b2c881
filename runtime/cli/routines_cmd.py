"""`chronicle routines list|run|history`: the workspace's routines, a manual run, and every firing."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any
from uuid import uuid4

import typer
from rich.markup import escape

from chronicle.runtime.app.loops import LoopSetupError, build_loop
from chronicle.runtime.app.specs import new_spec, normalise_provider, resolve_workspace
from chronicle.runtime.app.worker import advance_session, worker_name
from chronicle.runtime.clock import SYSTEM_CLOCK
from chronicle.runtime.routine_engine import RoutineEngine, run_row
from chronicle.runtime.routines import find_routine, load_routines
from chronicle.runtime.store import ChronicleStore

from .common import (
    DbOption,
    JsonOption,
    WorkspaceOption,
    cli_errors,
    fail,
    open_store,
    out_console,
    print_json,
)
from .render import short
from .tables import Column, fit_table

app = typer.Typer(help="Routines: prompts run on a schedule, on an event or by hand, declared as routines.NAME tables in chronicle.toml.",
                  no_args_is_help=True)

EXIT = {"completed": 0, "queued": 0, "running": 0, "failed": 1, "skipped": 4}


def engine_for(store: ChronicleStore, ws: Path, provider: str | None, model: str | None) -> RoutineEngine:
    """The engine with the spec a routine's session records: the workspace's main agent as a new session gets it, renamed."""
    spec = new_spec(ws, provider, model)
    return RoutineEngine.for_workspace(store, ws, spec, worker_name(), SYSTEM_CLOCK)


@app.command("list")
def list_routines(workspace: WorkspaceOption = None, as_json: JsonOption = False) -> None:
    """The routines in the workspace's chronicle.toml: `name`, `trigger`, `action`, `next_due` (cron only)."""
    with cli_errors():
        ws = resolve_workspace(workspace)
        now = SYSTEM_CLOCK.now()
        rows = [r.row(now) for r in load_routines(ws)]
        if as_json:
            for row in rows:
                print_json(row)
            return
        if not rows:
            out_console.print(f"no routines in {ws / 'chronicle.toml'}: add a [routines.NAME] table")
            return
        columns = [Column("name"), Column("trigger"), Column("action"), Column("next_due"), Column("prompt", flex=True)]
        table = [{"name": escape(r["name"]), "trigger": escape(r["trigger"]), "action": r["action"],
                  "next_due": (r["next_due"] or "")[:19].replace("T", " "), "prompt": escape(short(r["prompt"] or "(HEARTBEAT.md)", 120))}
                 for r in rows]
        out_console.print(fit_table(columns, table, out_console.width))


@app.command("run")
def run_routine(
    name: Annotated[str, typer.Argument(help="The routine (a [routines.NAME] table)")],
    provider: Annotated[
        str | None, typer.Option("--provider", help="anthropic or scripted:PATH (default: anthropic when ANTHROPIC_API_KEY is set)")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", help="Model for the routine's session")] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve tools that require approval without asking")] = False,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Fire the routine now, guardrails applied. A lightweight routine runs here, in its own session; a job is queued as a new session for a worker. JSON: `routine`, `session_id`, `status` (completed, failed, queued, skipped with the guardrail's `reason`). Exit 0 completed or queued, 1 failed, 4 skipped by a guardrail."""  # noqa: E501
    with cli_errors():
        ws = resolve_workspace(workspace)
        routine = find_routine(ws, name)
        store = open_store(db)
        engine = engine_for(store, ws, provider, model)
        run = engine.fire(routine, f"manual/{uuid4().hex}")
        assert run is not None  # a fresh due key cannot have been fired before
        if run.status == "fired" and routine.action == "lightweight" and run.session_id is not None:
            from chronicle.runtime.loop import LoopOptions

            def make_loop(session: Any) -> Any:
                try:
                    return build_loop(store, session, provider_name=normalise_provider(provider), model=model, workspace=ws,
                                      options=LoopOptions(auto_approve=yes))
                except LoopSetupError as exc:
                    fail(str(exc), 2)

            asyncio.run(advance_session(store, run.session_id, make_loop, engine.holder, auto_approve=yes))
            engine.settle()
            run = store.repository.get(run.id)
        row = run_row(engine, run)
        if as_json:
            print_json(row)
        else:
            detail = row["reason"] or row["summary"] or ""
            out_console.print(f"routine {escape(name)}: {row['status']}" + (f" — {escape(short(detail, 300))}" if detail else ""), soft_wrap=True)
            if row["session_id"]:
                out_console.print(f"session {row['session_id']}", soft_wrap=True)
        raise typer.Exit(EXIT.get(row["status"], 1))


@app.command("history")
def history(
    routine: Annotated[str | None, typer.Option("--routine", help="Only this routine")] = None,
    workspace: WorkspaceOption = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Every firing of the workspace's routines, oldest first: `routine`, `run_id`, `session_id`, `status` (queued, running, completed, failed, skipped), `trigger`, `due`, `action`, `fired_at`, `holder`, `reason`, `summary`, `usd`."""  # noqa: E501
    with cli_errors():
        ws = resolve_workspace(workspace)
        store = open_store(db)
        engine = RoutineEngine(store, ws.resolve(), spec=None, holder="")  # reading only: nothing is fired
        rows = [run_row(engine, r) for r in engine.history(routine)]
        if as_json:
            for row in rows:
                print_json(row)
            return
        if not rows:
            out_console.print("no routine has fired yet")
            return
        columns = [Column("fired_at"), Column("routine"), Column("due"), Column("status"), Column("session", optional=True),
                   Column("detail", flex=True)]
        table = [{"fired_at": r["fired_at"][:19].replace("T", " "), "routine": escape(r["routine"]), "due": escape(r["due"]),
                  "status": r["status"], "session": (r["session_id"] or "")[:8],
                  "detail": escape(short(r["reason"] or r["summary"] or "", 160))} for r in rows]
        out_console.print(fit_table(columns, table, out_console.width))
