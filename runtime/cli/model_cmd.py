"""`chronicle model SESSION [NAME] [--thinking N]`: show the model a session runs on, or record a change of it."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from .common import DbOption, JsonOption, cli_errors, open_store, out_console, print_json


def model(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix")],
    name: Annotated[Optional[str], typer.Argument(help="The model its next turns use (omit to show the current one)")] = None,
    thinking: Annotated[Optional[int], typer.Option(
        "--thinking", help="Extended-thinking budget in tokens for its next turns (0: off)", show_default=False)] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Show the model a session runs on, or change it from the next turn (records Session.ModelChanged)."""
    from chronicle.runtime.app import model_change

    with cli_errors():
        store = open_store(db, create=False)
        if name is None and thinking is None:
            choice = model_change.current(store, session)
        else:
            choice = model_change.change_model(store, session, name, thinking)
        if as_json:
            print_json(choice.row())
            return
        out_console.print(choice.line(), markup=False, highlight=False, soft_wrap=True)
