"""Ctrl-C in a command: one line on stderr saying what was done and what is left, exit 130.

typer turns a KeyboardInterrupt into exit 130 with nothing said, so a person who stopped `projections rebuild`
halfway could not tell that the read models were left at some position (and that the next command quietly
finishes them), nor whether an interrupted `verify` had found the chain sound so far. The root group
(app.py LazyGroup.invoke) prints the line for every command; a command that knows more about where it
stopped says it by running its work under `noted`, whose function is asked when Ctrl-C comes.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Callable, Iterator, NoReturn, Optional

#: Commands that change nothing a person sees (a read may bring the read models up to date, which every
#: later command would do anyway): interrupting them loses nothing.
READ_ONLY = frozenset({"sessions", "log", "history", "cost", "audit", "why", "tasks", "notes", "skills", "verify",
                       "export", "replay", "doctor", "jobs", "status", "check", "export-traces"})


class Interrupted(KeyboardInterrupt):
    """A Ctrl-C with the command's own account of where it stopped (`noted`)."""

    def __init__(self, state: str) -> None:
        super().__init__(state)
        self.state = state


@contextmanager
def noted(state: Callable[[], str]) -> Iterator[None]:
    """Run the block; on Ctrl-C, `state()` is what the interrupted line says (what was done, what is left).

    `state()` runs after the interrupt: it may read the store (the interrupted transaction was rolled back)."""
    try:
        yield
    except Interrupted:
        raise
    except KeyboardInterrupt:
        try:
            said = state()
        except Exception:  # noqa: BLE001 - the account is a courtesy: the general line is still true
            raise KeyboardInterrupt from None
        raise Interrupted(said) from None


def interrupted_line(exc: KeyboardInterrupt, command: Optional[str]) -> str:
    """The line for a Ctrl-C that ended `command` (its name as typed, None for the root)."""
    if isinstance(exc, Interrupted):
        return f"interrupted: {exc.state}"
    shown = f"`chronicle {command}`" if command else "chronicle"
    if command and command.split()[-1] in READ_ONLY:
        return f"interrupted: {shown} stopped before it finished; it changes nothing, so nothing is left half-done"
    return f"interrupted: {shown} stopped before it finished; what it recorded before stays recorded (each event is " \
           "written whole or not at all)"


def command_path_of(exc: BaseException) -> Optional[str]:
    """`chronicle projections rebuild`: the innermost command an exception passed through on its way up (the root
    group's context knows only the first word; a parser's error may carry no context at all)."""
    path = None
    tb = exc.__traceback__
    while tb is not None:
        ctx = tb.tb_frame.f_locals.get("ctx")
        if ctx is not None and isinstance(getattr(ctx, "command_path", None), str):
            path = ctx.command_path
        tb = tb.tb_next
    return path


def interrupted_command(exc: BaseException) -> Optional[str]:
    """The command (`projections rebuild`) the interrupt ended."""
    return " ".join((command_path_of(exc) or "").split()[1:]) or None


def report_interrupt(exc: KeyboardInterrupt) -> NoReturn:
    """Say `interrupted_line` on stderr and exit 130, as a shell reports a process ended by SIGINT."""
    import typer
    from rich.markup import escape

    from .common import err_console

    line = interrupted_line(exc, interrupted_command(exc))
    try:
        err_console.print(f"[yellow]interrupted:[/]{escape(line.removeprefix('interrupted:'))}")
    except Exception:  # noqa: BLE001 - stderr gone (a closed pipe): the exit code still says it
        pass
    raise typer.Exit(130)
