"""`chronicle verify`: re-compute the hash chain, print the head digest, check or write an anchor."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.markup import escape

from chronicle.runtime.verify import Verifier, read_anchor, session_to_verify, write_anchor

from .bars import Tracker, progress_bar
from .common import DbOption, JsonOption, cli_errors, err_console, fail, open_store, out_console, print_json
from .interrupts import noted


def verify(
    session: Annotated[Optional[str], typer.Argument(help="Session id or unique prefix: only what its conversation is read from (its sub-agents, the turns a fork inherits, attachments)")] = None,
    all_: Annotated[bool, typer.Option("--all", help="The whole log (the default without SESSION)")] = False,
    anchor: Annotated[Optional[Path], typer.Option("--anchor", help="Write the head (position and digest) to this anchor file")] = None,
    against: Annotated[Optional[Path], typer.Option("--against", help="Also check that the chain still holds this anchor file's head")] = None,
    force: Annotated[bool, typer.Option("--force", help="With --anchor: replace the anchor file if it exists")] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Re-compute the hash chain: exit 0 with a one-line verdict and counts, or exit 1 naming the first broken link (position, aggregate, event, and whether a row was edited, missing, reordered or inserted)."""
    with cli_errors():
        if session and all_:
            fail("give SESSION or --all, not both", 2)
        if anchor is not None and not force and (anchor.exists() or anchor.is_symlink()):
            # An anchor is the earlier head a later `--against` is checked with: replacing it by mistake loses that proof.
            fail(f"{anchor} exists; not overwriting an anchor: write to another path, remove it, or add --force", 2)
        expected = None
        if against is not None:
            try:
                expected = read_anchor(against)
            except ValueError as exc:
                fail(str(exc), 2)
        store = open_store(db, create=False)
        verifier = Verifier(store)
        with progress_bar(as_json) as tracker, noted(lambda: _where(tracker)):
            if session:
                sid = session_to_verify(store, session)
                verdict = verifier.verify_session(sid, expected, progress=tracker)
            else:
                verdict = verifier.verify_all(expected, progress=tracker)
        if anchor is not None and verdict.ok:
            try:
                write_anchor(anchor, verdict, datetime.now(timezone.utc).isoformat(), verifier.identity(), replace=force)
            except FileExistsError:
                fail(f"{anchor} exists; not overwriting an anchor: write to another path, remove it, or add --force", 2)
            except (OSError, ValueError) as exc:
                fail(f"cannot write the anchor {anchor}: {exc}")
        written = str(anchor) if anchor is not None and verdict.ok else None
        if as_json:
            # `anchor` is the one checked (--against); with --anchor, the file written (the library's verify has neither)
            print_json({**verdict.as_json(), **({"anchor_written": written} if anchor is not None else {})})
        else:
            style = "green" if verdict.ok else "red"
            out_console.print(f"[{style}]{escape(verdict.line())}[/]", soft_wrap=True)
            if written:
                err_console.print(f"anchor written to {escape(written)}: keep it where the database's writers cannot "
                                  f"reach; `verify --against {escape(written)}` checks the chain still holds it", soft_wrap=True)
        if not verdict.ok:
            raise typer.Exit(1)


def _where(tracker: Tracker) -> str:
    """Where an interrupted verify stopped: how far the check had come; nothing was changed."""
    if tracker.phase == "chain":
        so_far = f"after {tracker.done:,} of {tracker.total or 0:,} links, no break among them"
    elif tracker.phase == "snapshots":
        so_far = f"with the chain sound, after {tracker.done:,} of {tracker.total or 0:,} snapshots"
    else:
        so_far = "before checking a link"
    return f"verify stopped {so_far}; nothing was changed, and nothing is proven until a run reaches the end"
