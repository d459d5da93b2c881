"""Finishing an undo or redo --files that a crash cut off between its record and its file writes.

TurnsUndone/TurnsRedone v3 say when the files were asked for; FilesRestored/FilesReapplied say they
were written. A session with the first and not the second owes its files (Session.files_owed), and
`resume`, `doctor --repair` and the next undo/redo finish them here. Each file is settled on its own
rather than the whole restore refused: the conversation is already undone, so a file someone changed
since is left as it is and recorded as refused, and the others are still put back. Run twice, the
second run finds the files already written ("unchanged") and the restore already recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from .clock import SYSTEM_CLOCK, Clock
from .leases import DEFAULT_LEASE_S, LeaseKeeper, current_lease, holder_name, holding
from .pasteable import pasteable
from .store import ChronicleStore
from .timetravel import TimeTravelError
from .tools.base import ToolError
from .tools.sandbox import Sandbox
from .undo_redo import (
    REFUSED,
    FileRestore,
    WorkspaceMissing,
    _current,
    digest,
    reapplied_rows,
    restoration_plan,
    restored_rows,
    test_halt_before_file_writes,
    write_reapplied,
    write_restored,
)

#: Files a finish's line names one by one; past that it counts them by action and names the first changed ones.
SHOWN_FILES = 5


@dataclass(frozen=True)
class OwedFinished:
    session_id: UUID
    kind: str  # "undo" | "redo"
    #: Every file, as FilesRestored/FilesReapplied records it (what a program and `log --json` read).
    files: list[dict[str, str]]
    #: The store's URL, for the command the message suggests (runtime/pasteable.py).
    store_url: str | None = None

    @property
    def refused(self) -> list[str]:
        return [row["path"] for row in self.files if row["action"] == REFUSED]

    @property
    def message(self) -> str:
        """One line. A finish of 300 files printed all 300 (mostly `unchanged`, 7 KB): past SHOWN_FILES it says how
        many of each action, the first files it changed or refused (refused first: those are the user's to look
        at), and the command that lists them all."""
        said = f"session {self.session_id}: finished the files of an interrupted {self.kind} --files"
        if len(self.files) <= SHOWN_FILES:
            return f"{said} ({_named(self.files)})"
        counts: dict[str, int] = {}
        for row in self.files:
            action = "refused" if row["action"] == REFUSED else row["action"]
            counts[action] = counts.get(action, 0) + 1
        tally = ", ".join(f"{n} {action}" for action, n in counts.items())
        changed = sorted((row for row in self.files if row["action"] != "unchanged"), key=lambda row: row["action"] != REFUSED)
        named = _named(changed[:SHOWN_FILES])
        more = f", {len(changed) - SHOWN_FILES} more" if len(changed) > SHOWN_FILES else ""
        listing = pasteable(f"log {self.session_id} --json", self.store_url)
        return f"{said} ({len(self.files)} files: {tally}{'; ' + named + more if named else ''}); `{listing}` lists every file"


def _named(rows: list[dict[str, str]]) -> str:
    return ", ".join(f"{row['action']}: {row['path']}" for row in rows)


@dataclass(frozen=True)
class OwedHeld:
    """Another process holds the session's lease (a worker running it, or another finisher): nothing was written
    or recorded here; the holder finishes the files (a worker does before its next turn), or a later resume does."""

    session_id: UUID
    kind: str
    holder: str
    #: The store's URL, for the resume the message suggests (runtime/pasteable.py).
    store_url: str | None = None

    refused: tuple[str, ...] = ()

    @property
    def message(self) -> str:
        return (f"session {self.session_id}: the files of an interrupted {self.kind} --files were left to {self.holder}, "
                f"which holds the session; if they are still owed once it is done, `{pasteable(f'resume {self.session_id}', self.store_url)}` "
                "finishes them")


class _Settled(Exception):
    """Another process recorded the restore first."""


def _settle(sandbox: Sandbox, item: FileRestore, kind: str) -> Path | None:
    """What finishing does to this file: its target, or None when it is refused (changed since, a link)."""
    try:
        target = sandbox.lexical(item.path)
        current = _current(target, item.path, kind)
    except (ToolError, TimeTravelError, OSError):
        item.action = REFUSED
        return None
    item.seen = digest(current)
    undone, done = (item.after, item.before) if kind == "undo" else (item.before, item.after)
    if current == undone and current != done:
        if kind == "undo":
            item.action = "deleted" if item.before is None else "restored"
        else:
            item.action = "deleted" if item.after is None else "reapplied"
    elif current == done:
        item.action = "unchanged"
    else:
        item.action = REFUSED
        return None
    return target


def finish_owed(store: ChronicleStore, session_id: UUID, clock: Clock = SYSTEM_CLOCK, holder: str | None = None,
                held: bool = False, lease_s: float = DEFAULT_LEASE_S) -> OwedFinished | OwedHeld | None:
    """Write the files the session's last undo/redo --files still owes and record it; None if nothing is owed.

    Under the session's lease (runtime/leases.py), as `holder` (default: this process): resume, doctor --repair,
    the next undo/redo and workers may all find the debt at once, and two writing the same files could record as
    refused a file the other had just put back. If another process holds it, OwedHeld and nothing is done. The
    lease is renewed while the files are written (a restore of many large files may outlast it); one lost by then
    (refused at a renewal) is OwedHeld too, with nothing written or recorded after the loss was seen.
    `held`: the caller holds the lease already (a worker advancing the session, which renews it)."""
    owed: dict[str, Any] | None = store.session(session_id).files_owed
    if not owed:
        return None
    if held:
        return _finish(store, session_id, owed, clock)
    who = holder or holder_name()
    with holding(store, session_id, who, lease_s, clock) as keeper:
        if keeper is None:
            return _held_by(store, session_id, str(owed["kind"]))
        owed = store.session(session_id).files_owed  # read again under the lease: the last holder may have finished
        if not owed:
            return None
        try:
            return _finish(store, session_id, owed, clock, keeper)
        except _LeaseLost:
            return _held_by(store, session_id, str(owed["kind"]))


def _held_by(store: ChronicleStore, session_id: UUID, kind: str) -> OwedHeld:
    lease = current_lease(store, session_id)
    return OwedHeld(session_id, kind, lease.holder if lease and lease.holder else "another process", store_url=store.url)


class _LeaseLost(Exception):
    """A renewal of the lease was refused while the files were being written: another process took the session."""


def _finish(store: ChronicleStore, session_id: UUID, owed: dict[str, Any], clock: Clock,
            keeper: LeaseKeeper | None = None) -> OwedFinished | None:
    kind, turn_ids = owed["kind"], [UUID(str(t)) for t in owed["turn_ids"]]
    root = Path(owed["workspace"] or ".")
    if not root.is_dir():
        raise WorkspaceMissing(f"session {session_id} owes the files of an interrupted {kind} --files in {root}, "
                               "which is not a directory any more; put it back, then resume")
    plan = restoration_plan(store, turn_ids)
    sandbox = Sandbox.of(root, store.url)
    targets = [(target, item) for item in plan if (target := _settle(sandbox, item, kind)) is not None]
    test_halt_before_file_writes()
    if keeper is not None and not keeper.confirm():
        raise _LeaseLost
    if kind == "undo":
        write_restored(root, plan, targets, store_url=store.url)
        rows = restored_rows(plan)
    else:
        write_reapplied(root, targets)
        rows = reapplied_rows(plan)

    def record(s: Any) -> None:
        if keeper is not None and keeper.lost:
            raise _LeaseLost
        if s.files_owed != owed:
            raise _Settled
        if kind == "undo":
            s.record_files_restored(turn_ids, rows, clock.now())
        else:
            s.record_files_reapplied(turn_ids, rows, clock.now())

    try:
        store.update_session(session_id, record)
    except _Settled:
        return None
    return OwedFinished(session_id, kind, rows, store_url=store.url)


def sessions_owing(store: ChronicleStore) -> list[UUID]:
    """Every session whose last undo/redo --files did not finish writing its files."""
    return [s.id for s in store.sessions() if getattr(s, "files_owed", None)]
