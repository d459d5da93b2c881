"""Shell completion options that take the shell's name, and fall back to detecting it.

typer's own options become plain flags once `shellingham` is installed: `--show-completion zsh`
then prints the script of whichever shell is among the process's ancestors, and with none (a
container's entry point, CI without a login shell) it fails with "Shell  not supported.". Users
copy the script for another machine's shell, so the name they give must win; it is optional so
that `chronicle --install-completion` alone still installs for the shell at hand.

typer's copy of click has no options with an optional value, so `entry.main` answers the
options when they are the whole command line, with or without a name, before typer parses
anything; the typer options below list them in `--help` and answer them elsewhere on the line.

Completion itself (the `_CHRONICLE_COMPLETE` variable the scripts set) needs typer's completion
classes registered; `register_if_completing` does that only when a shell asks, so no other
command pays for it.
"""

from __future__ import annotations

import os
from typing import Any, Optional

import typer

PROG = "chronicle"
COMPLETE_VAR = "_CHRONICLE_COMPLETE"
SHELLS = ("bash", "zsh", "fish", "powershell", "pwsh")
DETECT = "detect"  # the value an option stands for when given without a shell name
SHOW = "--show-completion"
INSTALL = "--install-completion"


def register_if_completing() -> None:
    """Register typer's completion classes when a shell is asking for completions."""
    if os.environ.get(COMPLETE_VAR):
        from typer._completion_classes import completion_init

        completion_init()


class UnknownShell(ValueError):
    """The shell was not named and could not be told, or is one Chronicle cannot complete."""


def shell_named(value: str) -> str:
    """The shell named, or the one this process runs under (`DETECT`)."""
    name = value.strip().lower()
    if name == DETECT:
        from typer._completion_shared import _get_shell_name

        try:
            detected = _get_shell_name()
        except Exception:  # noqa: BLE001 - shellingham fails differently per platform
            detected = None
        name = (detected or os.path.basename(os.environ.get("SHELL", ""))).lower()
        if name not in SHELLS:
            raise UnknownShell(
                "could not tell which shell this is; name it, e.g. `chronicle --show-completion bash` "
                f"(one of {', '.join(SHELLS)})"
            )
    if name not in SHELLS:
        raise UnknownShell(f"{value!r} is not a shell Chronicle completes; give one of {', '.join(SHELLS)}")
    return name


#: What each option does, for its own `--help` and the main `--help`.
PURPOSE = {
    SHOW: f"Print the completion script for SHELL ({', '.join(SHELLS)}; default: the current shell) and exit.",
    INSTALL: "Install completion for SHELL (default: the current shell) and exit.",
}


def run(option: str, value: str | None) -> int:
    """Print (`--show-completion`) or install (`--install-completion`) the script; the exit code."""
    if value in ("--help", "-h"):
        typer.echo(f"Usage: {PROG} {option} [SHELL]\n\n  {PURPOSE[option]}")
        return 0
    try:
        shell = shell_named(DETECT if value is None else value)
    except UnknownShell as exc:
        typer.echo(f"error: {option}: {exc}", err=True)
        return 2
    if option == SHOW:
        from typer._completion_shared import get_completion_script

        typer.echo(get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell))
        return 0
    from typer._completion_shared import install as install_script

    shell, path = install_script(shell=shell, prog_name=PROG, complete_var=COMPLETE_VAR)
    typer.secho(f"{shell} completion installed in {path}", fg="green")
    typer.echo("It takes effect in a new terminal.")
    return 0


def _flag(option: str) -> Any:
    """The option as `--help` lists it; `entry.completion_asked` answers it with a shell name first."""

    def answer(ctx: typer.Context, param: Any, value: Optional[bool]) -> None:
        if value and not ctx.resilient_parsing:
            raise typer.Exit(run(option, None))

    return answer


SHOW_OPTION: Any = typer.Option(
    SHOW, callback=_flag(SHOW), is_eager=True, expose_value=False, metavar="[SHELL]",
    help=PURPOSE[SHOW],
)
INSTALL_OPTION: Any = typer.Option(
    INSTALL, callback=_flag(INSTALL), is_eager=True, expose_value=False, metavar="[SHELL]",
    help=PURPOSE[INSTALL],
)
