"""`chronicle archive` / `unarchive`: take a session out of the listings and back; nothing is deleted."""

from __future__ import annotations

from typing import Annotated

import typer

from chronicle.runtime.app import archive as app_archive

from .common import DbOption, JsonOption, cli_errors, open_store, out_console, pasted, print_json

SessionArg = Annotated[str, typer.Argument(help="Session id or unique prefix")]


def archive(session: SessionArg, as_json: JsonOption = False, db: DbOption = None) -> None:
    """Hide an idle session from `sessions` (records Session.Archived; its log stays whole, `sessions --all` shows it)."""
    with cli_errors():
        store = open_store(db, create=False)
        sid = app_archive.archive(store, session)
        if as_json:
            print_json({"session_id": str(sid), "archived": True})
            return
        out_console.print(f"archived session {sid}; `{pasted(f'unarchive {sid}', store.url)}` lists it again", soft_wrap=True)


def unarchive(session: SessionArg, as_json: JsonOption = False, db: DbOption = None) -> None:
    """List an archived session in `sessions` again (records Session.Unarchived)."""
    with cli_errors():
        sid = app_archive.unarchive(open_store(db, create=False), session)
        if as_json:
            print_json({"session_id": str(sid), "archived": False})
            return
        out_console.print(f"session {sid} is listed again")
