"""`chronicle jobs`: background jobs — sessions run by workers — listed, submitted, inspected, cancelled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from rich.markup import escape

from .common import (
    DbOption,
    JsonOption,
    WorkspaceOption,
    cli_errors,
    err_console,
    fail,
    hint,
    missing_store,
    open_store,
    out_console,
    pasted,
    print_json_rows,
    read_prompt,
    store_command,
)
from .lazy import lazy_module
from .limits import LimitFlags, limit_options
from .render import short
from .run_cmd import ModelOption, ProviderOption
from .tables import Column, fit_table

if TYPE_CHECKING:  # the use cases import the loop, pydantic and the store; `--help` needs none of them
    from chronicle.runtime.app import jobs as use_cases
    from chronicle.runtime.app import specs
else:
    use_cases = lazy_module("chronicle.runtime.app.jobs")
    specs = lazy_module("chronicle.runtime.app.specs")

app = typer.Typer(help="Background jobs: sessions run by workers, apart from the chat or command that made them.")


def _print(rows: list[dict], as_json: bool, db: str | None = None) -> None:
    if as_json:
        print_json_rows(rows)
        return
    if not rows:
        out_console.print(f"no jobs: `{hint('jobs submit PROMPT', db)}` (or /job in chat) makes one, `{hint('worker', db)}` runs them",
                          soft_wrap=True)
        return
    columns = [Column("job"), Column("status"), Column("created", optional=True), Column("worker", optional=True),
               Column("prompt", flex=True)]
    table = [{"job": r["job_id"][:8], "status": r["status"], "created": r["created_at"][:19].replace("T", " "),
              "worker": escape((r["worker"] or "")[:24]), "prompt": escape(short(r["prompt"], 120))} for r in rows]
    out_console.print(fit_table(columns, table, out_console.width))


@app.callback(invoke_without_command=True)
def list_jobs(ctx: typer.Context, as_json: JsonOption = False, db: DbOption = None) -> None:
    """Every job, oldest first: `job_id` (its session), `status` (queued, running, awaiting_approval, interrupted, completed, failed, stopped, cancelling, cancelled), `prompt`, `origin`, `created_at`, `agent`, `worker`, `turns`, `final_text`, `reason`."""  # noqa: E501
    if ctx.invoked_subcommand is not None:
        return
    with store_command(db, create=False) as store:
        _print(use_cases.listing(store), as_json, db)


@app.command("submit")
@limit_options
def submit(
    prompt: Annotated[str, typer.Argument(help="What the agent should do (`-` reads it from stdin)")],
    provider: ProviderOption = None,
    model: ModelOption = None,
    workspace: WorkspaceOption = None,
    max_iterations: Annotated[int, typer.Option("--max-iterations", min=1, help="Model calls allowed in one turn")] = 20,
    as_json: JsonOption = False,
    db: DbOption = None,
    limits: LimitFlags = LimitFlags(),
) -> None:
    """Record PROMPT as a new job for a worker (checked as `run` checks it; exit 2 records nothing) and print its id, alone on stdout (`job=$(chronicle jobs submit …)`)."""  # noqa: E501
    with cli_errors():
        prompt = read_prompt(prompt)
        if not prompt.strip():
            fail("the prompt is empty; say what the agent should do", 2)
        ws = specs.resolve_workspace(workspace)
        if missing_store(db) is not None:  # a bad flag on a first run leaves no empty store behind
            use_cases.checked_spec(provider, model, ws, max_iterations, limits=limits)
        store = open_store(db)
        row = use_cases.submit(store, prompt, provider=provider, model=model, workspace=ws, max_iterations=max_iterations,
                               limits=limits)
        if as_json:
            _print([row], as_json)
            return
        job = row["job_id"]
        print(job)  # alone on stdout, as `submit` prints its session, for `job=$(chronicle jobs submit ...)`
        if err_console.is_terminal:
            err_console.print(f"[dim]queued for a worker: `{pasted('worker', store.url)}` runs it, or "
                              f"`{pasted(f'resume {job}', store.url)}` here and now; "
                              f"`{pasted(f'jobs status {job}', store.url)}` says how it went[/]", soft_wrap=True)


@app.command("status")
def status(job_id: Annotated[str, typer.Argument(help="The job (its session id or a unique prefix)")], as_json: JsonOption = False,
           db: DbOption = None) -> None:
    """One job, as `chronicle jobs` shows it; exit 1 if it is not a job."""
    with store_command(db, create=False) as store:
        row = use_cases.one(store, job_id)
        if as_json:
            print_json_rows([row])
            return
        _print_one(row, db)


def _print_one(row: dict, db: str | None) -> None:
    """`jobs status ID` answers "how did it go?": the whole id, and the answer or the reason, not only a list row."""
    created = row["created_at"][:19].replace("T", " ")
    lines = [f"job      {row['job_id']}", f"status   {row['status']}" + (f": {row['reason']}" if row["reason"] else ""),
             f"agent    {row['agent']}, {row['turns']} turn{'s' if row['turns'] != 1 else ''}, from {row['origin']}",
             f"created  {created}"]
    if row["worker"]:
        lines.append(f"worker   {row['worker']}")
    lines.append(f"prompt   {short(row['prompt'], 400)}")
    if row["final_text"]:
        lines.append(f"answer   {short(row['final_text'], 2000)}")
    for line in lines:
        out_console.print(escape(line), soft_wrap=True, highlight=False)
    short_id = row["job_id"][:8]
    out_console.print(f"[dim]`{hint(f'log {short_id}', db)}` shows each step[/]", soft_wrap=True)


@app.command("cancel")
def cancel(job_id: Annotated[str, typer.Argument(help="The job (its session id or a unique prefix)")], as_json: JsonOption = False,
           db: DbOption = None) -> None:
    """Cancel a job: a queued one is never started, one waiting for approval ends now, a running one is asked to stop at its next safe point; exit 1 if it already ended."""  # noqa: E501
    with store_command(db, create=False) as store:
        _print([use_cases.cancel(store, job_id)], as_json)
