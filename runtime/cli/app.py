"""The `chronicle` command: parse, then hand over to one handler per command."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from . import (  # one per line: commands are added often, by several people at once
    audit_cmd,
    bundle_cmd,
    chat_cmd,
    controls_cmd,
    cost_cmd,
    demo_cmd,
    doctor_cmd,
    inspect_cmd,
    jobs_cmd,
    mcp_cmd,
    projections_cmd,
    repairs_cmd,
    routines_cmd,
    run_cmd,
    serve_cmd,
    skills_cmd,
    tasks_cmd,
    timetravel_cmd,
    traces_cmd,
    verify_cmd,
    worker_cmd,
)

app = typer.Typer(
    name="chronicle",
    help="Chronicle: an event-sourced runtime for LLM agents. Every decision is an event you can audit, undo, replay and resume.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish and PowerShell
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)

# Commands grouped by what a person is doing, in the order they usually need them.
PANELS = {
    "Run an agent": (
        run_cmd.run,
        chat_cmd.chat,
        demo_cmd.demo,
    ),
    "Inspect": (
        inspect_cmd.sessions,
        inspect_cmd.log,
        inspect_cmd.history,
        cost_cmd.cost,
        audit_cmd.audit,
        tasks_cmd.tasks,
        skills_cmd.skills,
        traces_cmd.export_traces,
    ),
    "Steer a running session": (
        controls_cmd.steer,
        controls_cmd.cancel,
        worker_cmd.approve,
        worker_cmd.deny,
        controls_cmd.compact,
    ),
    "Time travel": (
        timetravel_cmd.undo,
        timetravel_cmd.redo,
        timetravel_cmd.fork,
        timetravel_cmd.replay,
    ),
    "Prove and move": (
        verify_cmd.verify,
        bundle_cmd.export,
        bundle_cmd.keygen,
    ),
    "Recover and operate": (
        worker_cmd.resume,
        worker_cmd.submit,
        worker_cmd.worker,
        serve_cmd.serve,
        repairs_cmd.repairs,
        doctor_cmd.doctor,
    ),
}
for panel, commands in PANELS.items():
    for command in commands:
        app.command(rich_help_panel=panel)(command)
app.command(name="import", rich_help_panel="Prove and move")(bundle_cmd.import_)
app.add_typer(projections_cmd.app, name="projections", rich_help_panel="Recover and operate")
app.add_typer(routines_cmd.app, name="routines", rich_help_panel="Recover and operate")
app.add_typer(jobs_cmd.app, name="jobs", rich_help_panel="Recover and operate")
app.add_typer(mcp_cmd.app, name="mcp", rich_help_panel="Inspect")


def _print_version(value: bool) -> None:
    if value:
        from .entry import version_text

        typer.echo(version_text())
        raise typer.Exit()


@app.callback()
def _root(
    show_version: Annotated[
        Optional[bool], typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = None,
    db: Annotated[Optional[str], typer.Option(
        "--db", help="Database URL for the command that follows (as its own --db; `chronicle --db URL sessions`)",
        show_default=False)] = None,
) -> None:
    """Chronicle: an event-sourced runtime for LLM agents. Every decision is an event you can audit, undo, replay and resume."""
    if db is not None:
        # Every command's --db reads CHRONICLE_DB when not given, and this runs before the command's
        # options are parsed: the command's own --db, when given as well, still wins.
        import os

        os.environ["CHRONICLE_DB"] = db


def main() -> None:
    """Run the CLI; an unexpected error is one line (CHRONICLE_DEBUG=1 shows the traceback)."""
    import logging
    import os
    import sys

    logging.basicConfig(format="chronicle: warning: %(message)s", level=logging.WARNING)
    try:
        app()
    except Exception as exc:  # noqa: BLE001 - the last line of defence for a person at a terminal
        if os.environ.get("CHRONICLE_DEBUG"):
            raise
        first = (str(exc).strip().splitlines() or [""])[0]
        sys.stderr.write(
            f"chronicle: internal error: {type(exc).__name__}: {first}\n"
            "Nothing recorded was lost; set CHRONICLE_DEBUG=1 to see the traceback, and please report it.\n"
        )
        raise SystemExit(1) from None
