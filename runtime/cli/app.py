"""The `chronicle` command: parse, then hand over to one handler per command.

Commands are registered by name and imported when used: each command module imports what it runs
(the store, the loop, providers, SDKs), so importing them all made every command, even a read of a
small store, spend most of a second importing code it never calls. `--help` on the root lists
each command with its help line from `help_index.py` (written from the commands themselves, and
checked against them by a test), so it imports none of them either.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, MutableMapping
from importlib import import_module
from typing import TYPE_CHECKING, Annotated, Any, NamedTuple, NoReturn, Optional

import typer
import typer.core
import typer.main
from typer._click.exceptions import ClickException, UsageError

from . import completion

if TYPE_CHECKING:  # typer runs on its own copy of click: its Command, not click's, is what groups hold
    from typer._click.core import Command


class Lazy(NamedTuple):
    """A command by where it lives: `module:attribute` under chronicle.runtime.cli, a function or a sub-app."""

    name: str
    target: str
    panel: str
    group: bool = False  # the attribute is a typer.Typer of subcommands (`chronicle projections …`)


# Commands grouped by what a person is doing, in the order they usually need them (one per line:
# commands are added often, by several people at once). Names are what `typer` derives from the
# function name (underscores become dashes) unless given.
COMMANDS = [
    Lazy("run", "run_cmd:run", "Run an agent"),
    Lazy("chat", "chat_cmd:chat", "Run an agent"),
    Lazy("demo", "demo_cmd:demo", "Run an agent"),
    Lazy("sessions", "inspect_cmd:sessions", "Inspect"),
    Lazy("archive", "archive_cmd:archive", "Inspect"),
    Lazy("unarchive", "archive_cmd:unarchive", "Inspect"),
    Lazy("log", "inspect_cmd:log", "Inspect"),
    Lazy("history", "inspect_cmd:history", "Inspect"),
    Lazy("cost", "cost_cmd:cost", "Inspect"),
    Lazy("audit", "audit_cmd:audit", "Inspect"),
    Lazy("why", "why_cmd:why", "Inspect"),
    Lazy("tasks", "tasks_cmd:app", "Inspect", group=True),
    Lazy("notes", "notes_cmd:notes", "Inspect"),
    Lazy("skills", "skills_cmd:skills", "Inspect"),
    Lazy("export-traces", "traces_cmd:export_traces", "Inspect"),
    Lazy("steer", "controls_cmd:steer", "Steer a running session"),
    Lazy("cancel", "controls_cmd:cancel", "Steer a running session"),
    Lazy("approve", "worker_cmd:approve", "Steer a running session"),
    Lazy("deny", "worker_cmd:deny", "Steer a running session"),
    Lazy("compact", "controls_cmd:compact", "Steer a running session"),
    Lazy("model", "model_cmd:model", "Steer a running session"),
    Lazy("undo", "timetravel_cmd:undo", "Time travel"),
    Lazy("redo", "timetravel_cmd:redo", "Time travel"),
    Lazy("fork", "timetravel_cmd:fork", "Time travel"),
    Lazy("replay", "timetravel_cmd:replay", "Time travel"),
    Lazy("verify", "verify_cmd:verify", "Prove and move"),
    Lazy("export", "bundle_cmd:export", "Prove and move"),
    Lazy("keygen", "bundle_cmd:keygen", "Prove and move"),
    Lazy("forget", "forget_cmd:forget", "Prove and move"),
    Lazy("resume", "worker_cmd:resume", "Recover and operate"),
    Lazy("submit", "worker_cmd:submit", "Recover and operate"),
    Lazy("worker", "worker_cmd:worker", "Recover and operate"),
    Lazy("serve", "serve_cmd:serve", "Recover and operate"),
    Lazy("repairs", "repairs_cmd:repairs", "Recover and operate"),
    Lazy("doctor", "doctor_cmd:doctor", "Recover and operate"),
    Lazy("import", "bundle_cmd:import_", "Prove and move"),
    Lazy("projections", "projections_cmd:app", "Recover and operate", group=True),
    Lazy("routines", "routines_cmd:app", "Recover and operate", group=True),
    Lazy("jobs", "jobs_cmd:app", "Recover and operate", group=True),
    Lazy("mcp", "mcp_cmd:app", "Inspect", group=True),
]


def load(entry: Lazy) -> Command:
    """Import one command's module and build its click command exactly as `app.command()` would."""
    module, attribute = entry.target.split(":")
    target = getattr(import_module(f"{__package__}.{module}"), attribute)
    holder = typer.Typer(pretty_exceptions_enable=False)
    if entry.group:
        holder.add_typer(target, name=entry.name, rich_help_panel=entry.panel)
    else:
        holder.command(name=entry.name, rich_help_panel=entry.panel)(target)
    return bounded(typer.main.get_group(holder).commands[entry.name])


def bounded(command: Command) -> Command:
    """`command` (and its subcommands) with every integer it takes at most LARGEST, the largest the stores hold.

    Here, where every command is built, so that no option is left out (`--at`, `--version`, `--step`, `--turn`,
    `--limit`, positions, counts, and whatever is added later): a larger one reached SQL as an OverflowError
    ("internal error") or a "datatype mismatch" said as the store being unavailable, where it is a usage
    error (exit 2) naming the range, as the library's arguments (chronicle/arguments.py) and the server's are."""
    from typer._click import types

    for param in command.params:
        kind = param.type
        if isinstance(kind, types.IntRange):
            if kind.max is None:
                param.type = _stored_int()(kind.min, min_open=kind.min_open, clamp=kind.clamp)
        elif type(kind) is types.IntParamType:  # not a subclass such as RowCount, which says what a huge one means
            param.type = _stored_int()(None)
        if isinstance(param.type, types._NumberRangeBase) and param.metavar is None and not param.param_type_name == "argument":
            # `<int>` and `<float>`, the range beside them as before: `<float range> [x>=0.001]` took a third of an
            # 80-column help's width from the help text, which then cut words with `…`
            param.metavar = "<int>" if isinstance(param.type, types.IntRange) else "<float>"
    for sub in (getattr(command, "commands", None) or {}).values():
        bounded(sub)
    return command


@functools.cache
def _stored_int() -> type:
    """An integer option's type with the stores' bound: `--help` states the range the option always stated (`x>=1`,
    or none), not the bound every integer shares; a number past it is refused naming it."""
    from typer._click import types

    from chronicle.runtime.bounds import LARGEST

    class StoredInt(types.IntRange):
        def __init__(self, low: int | None, min_open: bool = False, clamp: bool = False) -> None:
            super().__init__(-LARGEST - 1 if low is None else low, LARGEST, min_open=min_open, clamp=clamp)
            self.stated = low is not None

        def _describe_range(self) -> str:
            return f"x{'>' if self.min_open else '>='}{self.min}" if self.stated else ""

        def convert(self, value: Any, param: Any, ctx: Any) -> Any:
            number = types.INT.convert(value, param, ctx)
            if not -LARGEST - 1 <= number <= LARGEST:
                self.fail(f"{number} is beyond what a store holds: at most {LARGEST}", param, ctx)
            return super().convert(number, param, ctx)

    return StoredInt


class LazyCommands(MutableMapping[str, "Command"]):
    """A group's `commands` that knows every name up front and imports a command on first lookup.

    Listing names (usage, typo suggestions, completion of names) imports nothing; looking one up
    (running it, `--help`) imports its module only."""

    def __init__(self, entries: list[Lazy], loaded: MutableMapping[str, Command]) -> None:
        self.entries = {entry.name: entry for entry in entries}
        self.loaded = dict(loaded)
        #: True while the root's help is written: a command is then a stand-in with its help line.
        self.listing = False

    def __getitem__(self, name: str) -> Command:
        if name not in self.loaded:
            if self.listing and name in self.entries:
                return stand_in(self.entries[name])
            self.loaded[name] = load(self.entries[name])
        return self.loaded[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self.loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self.entries.pop(name, None)
        self.loaded.pop(name, None)

    def __iter__(self) -> Iterator[str]:
        yield from self.entries
        yield from (name for name in self.loaded if name not in self.entries)

    def __len__(self) -> int:
        return len(self.entries.keys() | self.loaded.keys())

    def __contains__(self, name: object) -> bool:
        return name in self.entries or name in self.loaded


def stand_in(entry: Lazy) -> Command:
    """What the root's help shows of a command (its panel and help line), without importing it."""
    from .help_index import HELP_LINES

    kind = typer.core.TyperGroup if entry.group else typer.core.TyperCommand
    return kind(name=entry.name, help=HELP_LINES.get(entry.name, ""), rich_help_panel=entry.panel)


def help_lines() -> dict[str, str]:
    """Each command's help line as the root's help shows it (the first paragraph of its help),
    from the commands themselves: what `help_index.py` holds."""
    import inspect

    lines = {}
    for entry in COMMANDS:
        command = load(entry)
        lines[entry.name] = inspect.cleandoc(command.short_help or command.help or "").split("\n\n")[0].strip()
    return lines


class LazyGroup(typer.core.TyperGroup):
    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = LazyCommands(COMMANDS, self.commands)

    def format_help(self, ctx: Any, formatter: Any) -> None:
        commands = self.commands
        if not isinstance(commands, LazyCommands):
            return super().format_help(ctx, formatter)
        commands.listing = True
        try:
            return super().format_help(ctx, formatter)
        finally:
            commands.listing = False

    def make_context(self, info_name: Optional[str], args: list[str], parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent, **extra)
        except ClickException as exc:  # the root's own options: `chronicle --bogus`
            usage_error(exc)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:  # typer would exit 130 saying nothing (cli/interrupts.py)
            from .interrupts import report_interrupt

            report_interrupt(exc)
        except ClickException as exc:  # a command's arguments, or a command that does not exist
            usage_error(exc)


def usage_error(exc: Any) -> NoReturn:
    """A usage error as every other error is said: one `error:` line, here naming the option and what it takes
    and where to read more, with click's code (2). typer drew a five-line panel (usage, a hint, a boxed message),
    while the commands' own refusals are one line; `chronicle` with no command still shows the help."""
    if type(exc).__name__ == "NoArgsIsHelpError":
        raise exc
    from rich.markup import escape

    from .common import err_console
    from .interrupts import command_path_of

    message = exc.format_message().strip().rstrip(".")
    message = message[:1].lower() + message[1:] if message[1:2].islower() else message  # "No such …", not "URL"
    ctx = getattr(exc, "ctx", None)
    path = ctx.command_path if ctx is not None else command_path_of(exc)
    see = f"; see `{path} --help`" if path and isinstance(exc, UsageError) else ""
    err_console.print(f"[red]error:[/] {escape(message)}{escape(see)}")
    raise typer.Exit(exc.exit_code)


app = typer.Typer(
    name="chronicle",
    cls=LazyGroup,
    help="Chronicle: an event-sourced runtime for LLM agents. Every decision is an event you can audit, undo, replay and resume.",
    no_args_is_help=True,
    add_completion=False,  # ours take the shell's name (completion.py); typer's detect it only
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from .entry import version_text

        typer.echo(version_text())
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    show_version: Annotated[
        Optional[bool], typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit.")
    ] = None,
    db: Annotated[Optional[str], typer.Option(
        "--db", help="Database URL for the command that follows (as its own --db; `chronicle --db URL sessions`)",
        show_default=False)] = None,
    _install_completion: Annotated[Optional[bool], completion.INSTALL_OPTION] = None,
    _show_completion: Annotated[Optional[bool], completion.SHOW_OPTION] = None,
) -> None:
    """Chronicle: an event-sourced runtime for LLM agents. Every decision is an event you can audit, undo, replay and resume."""
    if db is not None and not db.strip():
        from chronicle.runtime.config import EMPTY_URL

        raise typer.BadParameter(EMPTY_URL, param_hint="--db")
    if db is not None:
        # Every command's --db reads CHRONICLE_DB when not given, and this runs before the command's
        # options are parsed: the command's own --db, when given as well, still wins.
        import os

        from chronicle.runtime.pasteable import SHELL_DB

        # The hints the command prints are for the user's shell, whose CHRONICLE_DB is not this one
        # (runtime/pasteable.py); known for this command only, as CliRunner runs many in one process.
        token = SHELL_DB.set(os.environ.get("CHRONICLE_DB", ""))
        ctx.call_on_close(lambda: SHELL_DB.reset(token))
        os.environ["CHRONICLE_DB"] = db


def main() -> None:
    """Run the CLI; an unexpected error is one line (CHRONICLE_DEBUG=1 shows the traceback)."""
    import logging
    import os
    import sys

    class OneLineWarnings(logging.Formatter):
        """`chronicle: warning: …` and nothing more at a terminal: a library that logs with a traceback (the MCP SDK
        does for each line a server writes that it cannot parse) shows it only with CHRONICLE_DEBUG=1, as errors do.
        Secrets are masked as in error lines (a URL's password as `u:***@`): a library's warning may name one."""

        def format(self, record: logging.LogRecord) -> str:
            from chronicle.runtime.redaction import redact_secrets

            from .render import printable  # a line an MCP server wrote: it must not drive the terminal either

            if os.environ.get("CHRONICLE_DEBUG") or not (record.exc_info or record.stack_info):
                return printable(redact_secrets(super().format(record)))
            return printable(redact_secrets(super().format(logging.makeLogRecord({**record.__dict__, "exc_info": None, "exc_text": None,
                                                                                    "stack_info": None}))))

    warnings = logging.StreamHandler()
    warnings.setFormatter(OneLineWarnings("chronicle: warning: %(message)s"))
    logging.basicConfig(level=logging.WARNING, handlers=[warnings])
    completion.register_if_completing()
    try:
        app(prog_name=completion.PROG)  # also under `python -m`: usage lines and the completion variable say chronicle
    except Exception as exc:  # noqa: BLE001 - the last line of defence for a person at a terminal
        if os.environ.get("CHRONICLE_DEBUG"):
            raise
        from chronicle.runtime.app.errors import cause_line, first_line, known_failure

        # A failure the commands know (a read-only database, an id naming nothing, …) raised outside their
        # cli_errors: the same line and code they give it, never "internal error".
        from .common import located_url
        from .render import printable

        known = known_failure(exc, located_url())
        if known is not None:
            sys.stderr.write(f"error: {printable(first_line(known))}\n")  # as the commands' cli_errors say it
            raise SystemExit(known.code) from None
        sys.stderr.write(
            f"chronicle: internal error: {printable(cause_line(exc))}\n"
            "Nothing recorded was lost; set CHRONICLE_DEBUG=1 to see the traceback, and please report it.\n"
        )
        raise SystemExit(1) from None
