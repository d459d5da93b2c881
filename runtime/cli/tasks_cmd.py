"""`chronicle tasks SESSION`: the task board of a session, read from the task aggregates; and
`chronicle tasks add SESSION TEXT`: a task put on the board ahead of delegation, which a `delegate`
task item then claims by its task_id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer
import typer.core
from rich.markup import escape

from .common import (
    DbOption,
    JsonOption,
    out_console,
    print_json_rows,
    store_command,
)
from .lazy import lazy_module
from .render import short
from .tables import Column, fit_table

if TYPE_CHECKING:  # the use cases import the store and the registry; `--help` needs neither
    from chronicle.runtime.app import tasks as use_cases
else:
    use_cases = lazy_module("chronicle.runtime.app.tasks")

STATUS_STYLE = {"completed": "green", "failed": "red", "in_progress": "yellow", "pending": "dim"}
LIST = "list"


class BoardGroup(typer.core.TyperGroup):
    """`tasks SESSION` stays the listing it always was: anything that is not a subcommand's name (or
    --help) is handed to the hidden `list` command. A session whose id begins with `add` is named by
    a longer prefix."""

    #: True while `tasks --help` is written: the group's params are then the listing's too (below).
    helping = False

    def format_help(self, ctx: Any, formatter: Any) -> None:
        """`tasks --help` shows the listing's SESSION, --json and --db beside `add`: the listing is the hidden `list`
        command, whose arguments and options the group's own help left out, so they were nowhere to be read."""
        self.helping = True
        try:
            super().format_help(ctx, formatter)
        finally:
            self.helping = False

    def get_params(self, ctx: Any) -> list[Any]:
        params = super().get_params(ctx)
        if not self.helping:  # parsing and completion: the group's own (--help); the listing parses its own
            return params
        listing = self.commands[LIST]
        return [*listing.params, *params]  # SESSION, --json, --db, then the group's --help

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        """The usage line is the group's own (`subcommand_metavar` names SESSION already), not the listing's again."""
        helping, self.helping = self.helping, False
        try:
            return super().collect_usage_pieces(ctx)  # type: ignore[no-any-return]
        finally:
            self.helping = helping

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        if not args:  # said here, so the usage line is this command's rather than the hidden `tasks list`
            ctx.fail("Missing argument 'SESSION'.")  # a usage error in typer's own click, which typer prints
        if args[0] not in self.commands and args[0] not in ctx.help_option_names:
            options = args[:args.index("--")] if "--" in args else args
            # `tasks SESSION --help` is this help, not the hidden `tasks list`'s (a name the user never typed)
            helped = [a for a in options if a in ctx.help_option_names]
            args = helped[:1] if helped else [LIST, *args]
        return super().parse_args(ctx, args)


app = typer.Typer(
    cls=BoardGroup,
    subcommand_metavar="SESSION [--json] | add SESSION TASK [--agent NAME] [--json]",
    help="The tasks a session delegated to sub-agents, each pending, in_progress, completed or failed, with the child "
         "session that works on it; `tasks add` puts one on its board ahead of delegation, for a delegate call to claim "
         "by task_id. A failed task's reflection is shown by `chronicle audit` and offered to later delegations of "
         "similar tasks.",
)


@app.command(LIST, hidden=True)
def tasks(
    session: Annotated[str, typer.Argument(help="The delegating session (id or unique prefix)")],
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """The session's board: tasks added to it (`tasks add`), then those its delegate calls opened."""
    with store_command(db, create=False) as store:
        sid = store.resolve_session_id(session)
        rows = use_cases.listing(store, sid)
        if as_json:
            print_json_rows(rows)
            return
        if not rows:
            out_console.print(f"session {sid} delegated no tasks")
            return
        columns = [Column("task"), Column("agent"), Column("status"), Column("child"), Column("summary", flex=True)]
        table = [
            {
                "task": r["task_id"][:8], "agent": escape(r.get("instance") or r["agent"] or "(any)"),
                "child": (r["child_session_id"] or "-")[:8],
                "status": f"[{STATUS_STYLE.get(r['status'], '')}]{r['status']}[/]",
                "summary": escape(short(r["summary"] or r["task"], 200)),
            }
            for r in rows
        ]
        out_console.print(fit_table(columns, table, out_console.width))


@app.command("add")
def add(
    session: Annotated[str, typer.Argument(help="The session whose board gets the task (id or unique prefix)")],
    text: Annotated[str, typer.Argument(help="What should be done")],
    agent: Annotated[Optional[str], typer.Option("--agent", help="Only this agent may claim it (default: any)")] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Put a task on SESSION's board ahead of delegation and print its task_id: pending with no child until a `delegate` task item names that task_id, whose child then claims it."""  # noqa: E501
    with store_command(db, create=False) as store:
        row = use_cases.add(store, session, text, agent)
        if as_json:
            print_json_rows([row])
        else:
            print(row["task_id"])
