"""Time travel use cases: undo, redo, fork and replay, as `chronicle` and chat's slash commands do them.

chat's /undo and /fork used to record their own events (a fork with `turn_id` where `chronicle
fork` wrote `turn`; an undo without the runtime's checks); both now come here, and a fork is
always `{"session_id", "turn"}` with the turn numbered as the conversation shows it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from chronicle.domain.session import Session

from .. import timetravel, undo_redo
from ..pasteable import pasteable
from ..store import ChronicleStore
from ..tools.imports import ToolLoadError
from .errors import AppError
from .queries import session_id
from .replay import Replayer, ReplayReport


@dataclass
class Undone:
    session_id: UUID
    turn_ids: list[UUID]
    files: list[dict[str, str]] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    #: An interrupted undo/redo --files this one finished first (said as a note, not in the JSON row).
    finished: str | None = None
    #: The files left as they are because someone changed them since (this undo's and the finished one's).
    refused: list[str] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        """`undo --json`."""
        return {"session_id": str(self.session_id), "undone": [str(t) for t in self.turn_ids], "files": self.files}


def undo(store: ChronicleStore, ref: str | UUID, turns: int = 1, files: bool = False, workspace: Path | None = None,
         actor: str | None = None) -> Undone:
    """`actor`: who undoes (default: this process's user@host; a server passes its caller)."""
    sid = session_id(store, ref)
    try:
        result = undo_redo.undo(store, sid, turns, files=files, workspace=workspace, actor=actor)
    except timetravel.TimeTravelError as exc:
        raise refused(store, sid, "undo", exc, actor) from None
    restored = undo_redo.restored_rows(result.files)
    return Undone(sid, result.turn_ids, restored, [store.turn(t).input_text for t in result.turn_ids], result.finished,
                  result.refused)


def refused_line(command: str, sid: Any, refused: list[str], url: str | None) -> str | None:
    """What an undo/redo --files says of the files it left as they are because someone changed them since it checked
    them (the rest were written, and all of it recorded): the CLI's error line (exit 1), the library's warning. `url`: the
    store's, for the `log` it suggests (runtime/pasteable.py)."""
    if not refused:
        return None
    shown = ", ".join(refused[:5]) + (f" and {len(refused) - 5} more" if len(refused) > 5 else "")
    return (f"{command} --files left {shown} as they are: changed since it checked them (the other files were written; "
            f"`{pasteable(f'log {sid}', url)}` records which); put them back by hand if they should be as {command} would have made them")


@dataclass
class Redone:
    session_id: UUID
    turn_ids: list[UUID]
    #: With `files`: what redo --files did, file by file (as Session.FilesReapplied records it).
    files: list[dict[str, str]] | None = None
    #: Without `files`: the files the redone turns wrote that are still as undo --files left them.
    left_undone: list[str] = field(default_factory=list)
    finished: str | None = None
    refused: list[str] = field(default_factory=list)
    #: The store's URL, for the undo and redo the warning suggests (runtime/pasteable.py).
    store_url: str | None = None

    @property
    def warning(self) -> str | None:
        if not self.left_undone:
            return None
        shown = ", ".join(self.left_undone[:5]) + (f" and {len(self.left_undone) - 5} more" if len(self.left_undone) > 5 else "")
        return (f"the redone turns changed files that are still as undo --files left them ({shown}); "
                f"to re-apply them, `{pasteable(f'undo {self.session_id} --turns {len(self.turn_ids)}', self.store_url)}` "
                f"then `{pasteable(f'redo {self.session_id} --files', self.store_url)}`")

    def row(self) -> dict[str, Any]:
        """`redo --json`: `files` always, as `undo --json` has it (`[]` without --files: a caller reading `files` from
        both must not need to know which was asked for files); `warning` when the workspace does not match the redone turns."""
        row: dict[str, Any] = {"session_id": str(self.session_id), "redone": [str(t) for t in self.turn_ids],
                               "files": self.files or []}
        if self.warning:
            row["warning"] = self.warning
        return row


def redo(store: ChronicleStore, ref: str | UUID, actor: str | None = None, files: bool = False,
         workspace: Path | None = None) -> Redone:
    """`files`: put back what the redone turns wrote, refusing by name a file changed since the undo."""
    sid = session_id(store, ref)
    try:
        if files:
            result = undo_redo.redo_with_files(store, sid, workspace=workspace, actor=actor)
            return Redone(sid, result.turn_ids, undo_redo.reapplied_rows(result.files), finished=result.finished,
                          refused=result.refused, store_url=store.url)
        turn_ids = undo_redo.redo(store, sid, actor=actor)
    except timetravel.TimeTravelError as exc:
        raise refused(store, sid, "redo", exc, actor) from None
    return Redone(sid, turn_ids, left_undone=undo_redo.files_left_undone(store, store.session(sid), turn_ids, workspace),
                  store_url=store.url)


def refused(store: ChronicleStore, sid: UUID, command: str, exc: timetravel.TimeTravelError, actor: str | None) -> AppError:
    """An undo or redo the session refuses is still a control: it leaves auth mode (seed 001), as `cancel` does with
    nothing running, and the error says so after why it was refused."""
    from ..credentials import leave_auth, left_auth_note
    from .stalled import stalled_note

    said = str(exc) + (stalled_note(store, sid) if " is busy" in str(exc) else "")
    return AppError(said + left_auth_note(leave_auth(store, sid, command, actor)), exc.exit_code)


def head_turn_number(store: ChronicleStore, session: Session) -> int:
    """The number (as `history --at` counts) of the last turn on the active branch; 0 if none."""
    if not session.head:
        return 0
    inherited = timetravel.inherited_turns(store, session)
    last = session.head[-1]
    if last in session.turns:
        return len(inherited) + session.turns.index(last) + 1
    return inherited.index(last) + 1 if last in inherited else len(session.head)


def fork(store: ChronicleStore, ref: str | UUID, at: int | None = None, actor: str | None = None) -> Session:
    """A new session continuing from turn `at`, or from the end of the active branch (chat's /fork)."""
    sid = session_id(store, ref)
    present = None
    if at is None:
        present = store.session(sid)
        if present.status != "idle":
            from .stalled import stalled_note

            raise AppError("the session is busy; fork it when the running turn has ended" + stalled_note(store, sid))
        at = head_turn_number(store, present)
        if at == 0:
            raise AppError(f"session {sid} has no turn on its branch to fork from")
    try:
        return timetravel.fork(store, sid, at, actor=actor, present=present)
    except timetravel.TimeTravelError as exc:
        raise AppError(str(exc), exc.exit_code) from None


def undone_note(store: ChronicleStore, child: Session) -> str | None:
    """The note for a fork made at a turn an undo has taken off its parent's branch (`fork --at` counts those turns,
    as `history --at` does): allowed, since forking what was taken back is how to carry it on without a redo, but
    said, since the parent's branch no longer reads that way."""
    origin = child.forked_from or {}
    if not origin.get("session_id") or not child.head:
        return None
    parent = store.session(UUID(str(origin["session_id"])), copy=False)
    if child.head[-1] in parent.head:
        return None
    return (f"turn {origin['turn']} of session {parent.id} was undone since (it is not on its branch); the fork "
            f"continues from it as it was")


async def replay(store: ChronicleStore, ref: str | UUID, workspace: Path | None = None) -> ReplayReport:
    """`workspace`: where the session's files are now; one that is not a directory is refused (exit 2) rather than
    copied as nothing, which replayed every file tool against an empty scratch workspace."""
    sid = session_id(store, ref)
    if workspace is not None and not Path(workspace).expanduser().is_dir():
        raise AppError(f"--workspace {workspace} is not a directory; pass the directory the session's files are in", 2)
    try:
        return await Replayer(store, sid, workspace).run()
    except ToolLoadError as exc:  # a tool the session recorded that this process cannot load
        raise AppError(f"session {sid}: {exc}", 2) from None


def replay_row(sid: UUID, report: ReplayReport) -> dict[str, Any]:
    """`replay --json`."""
    d = report.divergence
    divergence: dict[str, Any] | None = None
    if d is not None:
        divergence = {"turn": d.turn, "step": d.step, "kind": d.kind, "detail": d.detail}
        if d.parts is not None:  # at a request only: which of its parts differ (replay_earlier.py)
            divergence["parts"] = d.parts
    return {
        "session_id": str(sid), "identical": report.identical, "verdict": report.verdict(),
        "turns": report.turns, "model_calls": report.model_calls, "rechecked": report.rechecked, "reused": report.reused,
        "divergence": divergence, "earlier_schemas": report.earlier_schemas,
    }
