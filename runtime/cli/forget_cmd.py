"""`chronicle forget`: erase a session tree by destroying its data key (runtime/app/forget.py)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer
from rich.markup import escape

from chronicle.runtime.app.errors import AppError
from chronicle.runtime.app.forget import forget as forget_session
from chronicle.runtime.app.queries import session_id

from .common import DbOption, JsonOption, cli_errors, err_console, fail, open_store, out_console, print_json


def forget(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix: its whole tree (sub-agents and forks) is erased")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask: erase now (needed when not at a terminal)")] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Erase a session's content for good by destroying its tree's data key (needs CHRONICLE_CIPHER_KEY from the store's creation): the events stay and `verify` still passes, nobody can read them again, read models are rebuilt without them, and `audit` shows who erased it and when."""
    with cli_errors():
        store = open_store(db, create=False)
        try:
            sid = session_id(store, session)
        except AppError as exc:
            fail(str(exc), exc.code)
        if not yes:
            if not sys.stdin.isatty():
                fail(f"forgetting session {sid} cannot be undone; add --yes to confirm", 2)
            if not typer.confirm(f"Erase session {sid} and its sub-agents and forks for good?", default=False):
                fail("nothing erased", 1)
        try:
            done = forget_session(store, sid)
        except AppError as exc:
            fail(str(exc), exc.code)
        if as_json:
            print_json(done.as_json())
            return
        out_console.print(
            escape(f"forgot session tree {done.tree_id}: {len(done.session_ids)} session(s) erased by {done.actor} "
                   f"at {done.at}; read models rebuilt"), soft_wrap=True)
        err_console.print("the events stay, unreadable; `chronicle verify` still passes", soft_wrap=True)
