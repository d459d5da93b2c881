"""The `chronicle` command: parse, then hand over to one handler per command."""

from __future__ import annotations

import typer

from . import chat_cmd, controls_cmd, demo_cmd, inspect_cmd, run_cmd

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


def main() -> None:
    app()
