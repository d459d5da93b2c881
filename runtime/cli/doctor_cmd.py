"""`chronicle doctor`: find (and with --repair, mend) damage that would trip up other commands."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.markup import escape

from chronicle.runtime.config import sqlite_path
from chronicle.runtime.doctor import examine_log
from chronicle.runtime.pasteable import pasteable_in
from chronicle.runtime.store_errors import damage_advice

from .bars import Tracker, progress_bar
from .common import DbOption, JsonOption, out_console, print_json, store_command
from .interrupts import noted

REMEDY = {
    "dangling_index_entry": "run `chronicle doctor --repair` to withdraw the entry",
    "unindexed_session": "run `chronicle doctor --repair` to list it again",
    "unreadable_event": "restore the row from a backup, then `chronicle projections rebuild`",
    "missing_event": "restore the deleted rows from a backup (`chronicle verify` names where the chain was cut)",
    "unreadable_snapshot": "run `chronicle doctor --repair` to delete it (a cache: the events are loaded instead)",
    "missing_save_function": "run `chronicle doctor --repair` to create it again (the next save would too)",
    "files_owed": "run `chronicle resume SESSION` (or `chronicle doctor --repair`) to finish writing them",
    "damaged_file": "",  # store_errors.damage_advice, which names the file
    "misfit_event": "add the upcaster its schema change lacks, or restore the row from a backup; then `chronicle projections rebuild`",
}
#: An unreadable event a newer Chronicle wrote (runtime/event_versions.py): the row is sound, this release too old.
NEWER_REMEDY = "run a Chronicle at least as new as the one that wrote it; the row itself is sound"


def doctor(
    repair: Annotated[bool, typer.Option("--repair", help="Mend what can be mended: withdraw index entries naming no "
                                         "session, index sessions no listing shows (each one more event), delete snapshots "
                                         "that do not decode, create the PostgreSQL save function again, finish the file writes an "
                                         "interrupted undo/redo --files owes.")] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Check the store: the session index against the sessions, that every event decodes and fits its declared fields, that no aggregate's versions have a hole, and every snapshot decodes.

    Exit 0 when nothing is wrong (or everything found was repaired), 1 when a problem remains.
    """
    with store_command(db, create=False) as store:
        with progress_bar(as_json) as tracker, noted(lambda: _where(tracker, repair)):
            examined = examine_log(store, repair=repair, progress=lambda done, head: tracker("log", done, head))
        findings = examined.findings
        remaining = [f for f in findings if not f.repaired]
        if as_json:
            for finding in findings:
                print_json(finding.as_json())
        else:
            for f in findings:
                where = (f"position {f.position}" if f.position is not None
                         else f"session {f.session_id}" if f.session_id is not None
                         else f"snapshot of {f.aggregate_id} at version {f.version}" if f.version is not None else "store")
                newer = f.check == "unreadable_event" and "NewerEvent:" in f.detail
                remedy = NEWER_REMEDY if newer else REMEDY[f.check] or damage_advice(sqlite_path(store.url) or "FILE")
                state = "[green]repaired[/]" if f.repaired else f"[yellow]{escape(pasteable_in(remedy, store.url))}[/]"
                more = f" (and {f.similar} later event{'s' if f.similar != 1 else ''} like it)" if f.similar else ""
                out_console.print(f"{f.check}: {where}: {escape(f.detail)}{more} — {state}", soft_wrap=True)
            verdict = "no problems found" if not findings else f"{len(findings) - len(remaining)} repaired, {len(remaining)} remaining"
            out_console.print(f"{store.describe()}: {examined.events} events checked; {verdict}", soft_wrap=True)
        if remaining:
            raise typer.Exit(1)


def _where(tracker: Tracker, repair: bool) -> str:
    """Where an interrupted doctor stopped: how far it read, and what it changed (only --repair changes anything)."""
    read = f"after {tracker.done:,} of {tracker.total or 0:,} events" if tracker.phase else "before reading the log"
    changed = ("repairs made before it stay made; run it again to finish" if repair
               else "nothing was changed")
    return f"doctor stopped {read}; {changed}"
