"""The `chronicle` command: parse, then hand over to one handler per command."""

from __future__ import annotations

import typer

from . import audit_cmd, chat_cmd, controls_cmd, cost_cmd, demo_cmd, inspect_cmd, projections_cmd, run_cmd, timetravel_cmd, worker_cmd

app = typer.Typer(
    name="chronicle",
    help="Chronicle: an event-sourced runtime for LLM agents. Every decision is an event you can audit, undo, replay and resume.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.command()(run_cmd.run)
app.command()(inspect_cmd.sessions)
app.command()(inspect_cmd.log)
app.command()(inspect_cmd.history)
app.command()(demo_cmd.demo)
app.command()(controls_cmd.steer)
app.command()(controls_cmd.cancel)
app.command()(controls_cmd.compact)
app.command()(chat_cmd.chat)
app.command()(cost_cmd.cost)
app.command()(audit_cmd.audit)
app.add_typer(projections_cmd.app, name="projections")
for _command in (timetravel_cmd.undo, timetravel_cmd.redo, timetravel_cmd.fork, timetravel_cmd.replay,
                 worker_cmd.resume, worker_cmd.approve, worker_cmd.deny, worker_cmd.submit, worker_cmd.worker):
    app.command()(_command)


def main() -> None:
    app()
