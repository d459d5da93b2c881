"""Undo and redo: turns taken off and put back on a session's branch, with the files they changed.

Every file a tool writes is recorded with its text before and after (runtime/effects.py), so
`undo --files` can put the workspace back as the turns found it and `redo --files` as they left
it. Each file is checked before anything is written, acted on by its own path under the tools'
confinement, never through a link, and a file someone changed since is refused by name.
Reading the past and forking it, which need none of the tools, are runtime/timetravel.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator
from uuid import UUID

from chronicle.domain.errors import DomainError
from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn

from .actor import recorded_actor
from .clock import SYSTEM_CLOCK, Clock
from .leases import DEFAULT_LEASE_S, LeaseKeeper, current_lease, holder_name, holding
from .pasteable import pasteable, pasteable_in
from .session_tree_reads import delegated_ids
from .store import ChronicleStore, NotFound
from .timetravel import MomentOutOfRange, TimeTravelError
from .tools.base import ToolError
from .tools.fileio import current_text, write_exact
from .tools.sandbox import Sandbox


@dataclass
class FileRestore:
    path: str
    before: str | None
    after: str | None
    turn_number: int
    action: str = ""
    #: Directories the write that created the file made (outermost first); undo removes them if empty.
    created_dirs: list[str] = field(default_factory=list)
    removed_dirs: list[str] = field(default_factory=list)
    #: Directories redo --files made again for the file (they were gone when it wrote it back).
    recreated_dirs: list[str] = field(default_factory=list)
    #: The digest of the file's text when it was checked: the write step re-reads the file just
    #: before writing it and refuses it (action "refused") if it is no longer so.
    seen: str = ""


@dataclass
class UndoResult:
    turn_ids: list[UUID]
    files: list[FileRestore] = field(default_factory=list)
    #: What finishing an earlier, interrupted undo/redo --files did first (runtime/files_owed.py), if it owed any.
    finished: str | None = None
    #: The files that finishing left as they are (changed since): refused as this command's own are.
    finished_refused: list[str] = field(default_factory=list)

    @property
    def refused(self) -> list[str]:
        """Every file this command left as it is: its own ("refused: changed since") and the finished undo/redo's."""
        return self.finished_refused + [item.path for item in self.files if item.action == REFUSED]


def calls_of_turns(store: ChronicleStore, turn_ids: list[UUID]) -> Iterator[tuple[Turn, ToolCall]]:
    """Every tool call these turns made, in order, each with the turn of `turn_ids` it belongs to: a `delegate`
    call is followed by the calls of the sub-agent sessions it started (their turns, recursively for nested
    delegation), since what a sub-agent wrote the turn that asked for it wrote. Sub-agents run in their parent's
    loop and so in its workspace (runtime/loop.py `_spawn`): their paths are relative to the same directory."""
    for tid in turn_ids:
        turn = store.turn(tid)
        for call in _calls_with_children(store, turn, set()):
            yield turn, call


def _calls_with_children(store: ChronicleStore, turn: Turn, seen: set[UUID]) -> Iterator[ToolCall]:
    for call in store.tool_calls_of(turn):
        yield call
        for child_id in delegated_ids(call):
            if child_id in seen:
                continue
            seen.add(child_id)
            try:
                child = store.session(child_id)
            except NotFound:
                continue  # never started (a task_id it could not claim, a crash before it was created)
            if child.parent_tool_call_id != call.id:
                continue
            for child_turn in child.turns:
                try:
                    yield from _calls_with_children(store, store.turn(child_turn), seen)
                except NotFound:
                    continue


def restoration_plan(store: ChronicleStore, turn_ids: list[UUID]) -> list[FileRestore]:
    """Per file: its content before the first of these turns touched it, and after the last (the writes of the
    sub-agents their delegate calls started included, `calls_of_turns`)."""
    plan: dict[str, FileRestore] = {}
    for turn, call in calls_of_turns(store, turn_ids):
        for effect in call.effects:  # a cancelled or failed call keeps the writes it made before it ended
            if effect.get("kind") != "file":
                continue
            path = effect["path"]
            if path in plan:
                plan[path].after = effect.get("after")
            else:
                plan[path] = FileRestore(path, effect.get("before"), effect.get("after"), turn.number,
                                         created_dirs=list(effect.get("created_dirs") or []))
    return list(plan.values())


def _current(target: Path, shown: str, command: str = "undo") -> str | None:
    """The file's exact text, None if absent; a link or a non-file in its place is refused, not followed."""
    try:
        mode = os.lstat(target).st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode) or not stat.S_ISREG(mode):
        kind = "a symbolic link" if stat.S_ISLNK(mode) else "not a regular file"
        raise TimeTravelError(
            f"{shown} is now {kind}; {command} --files acts on the path itself and will not write or delete through it. "
            f"Put it back by hand, or {command} without --files"
        )
    return current_text(target)


def digest(text: str | None) -> str:
    return "absent" if text is None else hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


def _still_as_seen(target: Path, item: FileRestore, command: str) -> bool:
    """Re-read just before the write: a turn that started after the undo was recorded may have
    written the file since it was checked, and that write is not overwritten."""
    try:
        return digest(_current(target, item.path, command)) == item.seen
    except (TimeTravelError, OSError):
        return False


def _as_they_are(sandbox: Sandbox, plan: list[FileRestore], command: str) -> Iterator[tuple[Path, FileRestore, str | None]]:
    """Each planned file's own path (confined, never through a link) and its text now, for undo's or
    redo's check before anything is written."""
    for item in plan:
        try:
            target = sandbox.lexical(item.path)
        except ToolError as exc:
            raise TimeTravelError(f"cannot {command} --files {item.path}: {exc}") from None
        yield target, item, _current(target, item.path, command)


def checked_restore(workspace: Path, plan: list[FileRestore], store_url: str | None = None) -> list[tuple[Path, FileRestore]]:
    """Every file checked, nothing written: each one's path and what restoring it will do (its `action`),
    or TimeTravelError naming the first file someone changed since; `write_restored` then writes.

    Each file is acted on by its own path, under the tools' confinement: never through a link
    that replaced it (a symlink is refused; a hard link keeps its content, because the restored
    file is a new one renamed into place), never in the event store."""
    sandbox = Sandbox.of(workspace, store_url)
    targets = []
    for target, item, current in _as_they_are(sandbox, plan, "undo"):
        item.seen = digest(current)
        if current == item.after:
            item.action = "deleted" if item.before is None else "restored"
        elif current == item.before:
            item.action = "unchanged"  # already as before (an earlier undo was interrupted after writing)
        else:
            raise TimeTravelError(
                f"{item.path} was changed after turn {item.turn_number} wrote it; undo --files refuses to overwrite it. "
                f"Put it back by hand, or undo without --files"
            )
        targets.append((target, item))
    return targets


def write_restored(workspace: Path, plan: list[FileRestore], targets: list[tuple[Path, FileRestore]],
                   store_url: str | None = None) -> list[FileRestore]:
    """Write what `checked_restore` decided, then remove the directories the turns' writes made, if empty."""
    sandbox = Sandbox.of(workspace, store_url)
    for target, item in targets:
        if item.action in ("deleted", "restored") and not _still_as_seen(target, item, "undo"):
            item.action = REFUSED
        elif item.action == "deleted":
            target.unlink(missing_ok=True)
        elif item.action == "restored":
            write_exact(target, item.before or "")
    for item in plan:
        if item.action in ("deleted", "unchanged") and item.before is None:
            item.removed_dirs = remove_empty_dirs(sandbox, item.created_dirs)
    return plan


#: A file's action when it changed between the check and its write (or, finishing an owed restore,
#: since the turns or the undo left it): it is left as it is, and the refusal is recorded.
REFUSED = "refused: changed since"


def remove_empty_dirs(sandbox: Sandbox, created: list[str]) -> list[str]:
    """Remove the directories a write created, innermost first, each only if it is empty now
    (and a real directory, not a link): whatever else was put there since stays."""
    removed = []
    for relative in reversed(created):
        try:
            target = sandbox.lexical(relative)
        except ToolError:
            continue
        if target.is_symlink() or not target.is_dir():
            continue
        try:
            target.rmdir()
        except OSError:
            break  # not empty: its parents are not empty either
        removed.append(relative)
    return removed


def restored_rows(plan: list[FileRestore]) -> list[dict[str, str]]:
    """What `undo --files` did, file by file, then the directories it removed (as FilesRestored records it)."""
    rows = [{"path": p.path, "action": p.action} for p in plan]
    return rows + [{"path": d, "action": "removed directory"} for p in plan for d in p.removed_dirs]


class WorkspaceMissing(TimeTravelError):
    """--files names (or the session recorded) a directory that is not there: every file would
    look "changed since", which blamed the files instead of the path (exit 2, a usage error)."""

    exit_code = 2


def files_root(session: Session, workspace: Path | None) -> Path:
    root = (workspace or Path(session.spec.workspace or ".")).expanduser().resolve()
    if not root.is_dir():
        if workspace:
            raise WorkspaceMissing(f"--workspace {root} is not a directory; pass the directory the session's files are in")
        raise WorkspaceMissing(f"the session's workspace {root} is not a directory any more; "
                               "pass the directory its files are in with --workspace")
    return root


def finish_owed_first(store: ChronicleStore, session_id: UUID, clock: Clock, held: bool = False) -> tuple[str | None, list[str]]:
    """An undo/redo is not stacked on one whose file writes a crash cut off: those are finished first (what was done,
    and the files left as they are because someone changed them since). `held`: this process holds the session's
    lease already (an undo/redo --files)."""
    if not store.session(session_id).files_owed:
        return None, []
    from .files_owed import finish_owed  # it builds on this module

    done = finish_owed(store, session_id, clock=clock, held=held)
    return (done.message, list(done.refused)) if done else (None, [])


def undo(store: ChronicleStore, session_id: UUID, count: int, files: bool = False, workspace: Path | None = None,
         clock: Clock = SYSTEM_CLOCK, actor: str | None = None) -> UndoResult:
    """Move the last `count` turns off the active branch; with `files`, put their files back too.

    The files are checked first (one changed since refuses the undo, nothing recorded), then the
    undo of exactly these turns is recorded, saying the files are owed, and only then are the files
    written and the writes recorded. Written first, a turn reaching the branch before the record made
    the undo refuse ("run undo again") with the files of the turns it did not undo already put back.
    If the process dies after the undo is recorded and before FilesRestored, the session says the
    files are owed: `resume` (or `doctor --repair`, or the next undo/redo) finishes them (`finish_owed`).
    With `files`, the whole of it runs under the session's lease (`_files_lease`): another process's undo, redo or
    resume meanwhile is refused as busy rather than taking these owed files for an interrupted undo's.
    """
    if not files:
        return _undo(store, session_id, count, None, clock, actor, None)
    with _files_lease(store, session_id, "undo", clock) as keeper:
        return _undo(store, session_id, count, workspace, clock, actor, keeper)


class SessionHeld(TimeTravelError):
    """Another live process holds the session's lease (a turn running, another undo/redo --files writing its files,
    a finisher): undo/redo --files writes nothing and records nothing (exit 1; run it again once that is done)."""


@contextlib.contextmanager
def _files_lease(store: ChronicleStore, session_id: UUID, command: str, clock: Clock) -> Iterator[LeaseKeeper]:
    """The session's lease, held from the check of the files to the record that they were written, as a turn holds
    it: without it another process's undo (or resume) took this one's files, recorded as owed, for an interrupted
    undo's and finished them under its feet, and this one then recorded them a second time, as refused."""
    with holding(store, session_id, holder_name(), DEFAULT_LEASE_S, clock) as keeper:
        if keeper is None:
            lease = current_lease(store, session_id)
            holder = lease.holder if lease is not None and lease.holder else "another process"
            raise SessionHeld(f"session {session_id} is busy: {holder} holds it (a turn running, or another undo/redo "
                              f"--files writing its files); nothing was done, try {command} --files again once it is done")
        yield keeper


def _lost(session_id: UUID, command: str, keeper: LeaseKeeper | None, store: ChronicleStore) -> None:
    """The lease went to another process while the files were checked (the store was away longer than the lease):
    the undo/redo is recorded and its files are owed; they are left to that process, or to `resume`."""
    if keeper is not None and not keeper.confirm():
        raise SessionHeld(f"session {session_id}: the {command} is recorded but another process took the session before "
                          f"its files were written; they are owed, and `{pasteable(f'resume {session_id}', store.url)}` "
                          "finishes them once that process is done")


def _undo(store: ChronicleStore, session_id: UUID, count: int, workspace: Path | None, clock: Clock, actor: str | None,
          keeper: LeaseKeeper | None) -> UndoResult:
    files = keeper is not None
    finished, finished_refused = finish_owed_first(store, session_id, clock, held=files)
    session = store.session(session_id)
    if count > len(session.head):
        raise MomentOutOfRange(f"session {session_id} has {len(session.head)} turn(s) on its branch; cannot undo {count}")
    try:
        store.session(session_id).undo(count, clock.now())  # validates on a copy that is never saved
    except DomainError as exc:
        raise TimeTravelError(pasteable_in(str(exc), store.url)) from None
    undone = list(session.head[-count:])
    plan: list[FileRestore] = []
    checked: list[tuple[Path, FileRestore]] = []
    root = files_root(session, workspace) if files else None
    if root is not None:
        plan = restoration_plan(store, undone)
        checked = checked_restore(root, plan, store_url=store.url)
    who = recorded_actor(actor)

    def change(s: Session) -> None:
        if list(s.head[-count:]) != undone:
            raise TimeTravelError(f"session {session_id} changed while undoing; nothing was undone, run undo again")
        s.undo(count, clock.now(), actor=who, files=bool(plan), workspace=str(root) if plan else None)

    store.update_session(session_id, change)
    if root is not None and plan:
        test_halt_before_file_writes()
        _lost(session_id, "undo", keeper, store)
        write_restored(root, plan, checked, store_url=store.url)
        store.update_session(session_id, lambda s: s.record_files_restored(undone, restored_rows(plan), clock.now()))
    return UndoResult(undone, plan, finished, finished_refused)


#: Test-only: a path; an undo/redo --files that has recorded its TurnsUndone/TurnsRedone (or a finisher of owed
#: files, runtime/files_owed.py) creates it and then waits, so a test can kill the process exactly between the
#: record and the file writes, or change a file there and remove the path to let it go on.
TEST_HALT_ENV = "CHRONICLE_TEST_HALT_BEFORE_FILE_WRITES"


def test_halt_before_file_writes() -> None:
    gate = os.environ.get(TEST_HALT_ENV)
    if not gate:
        return
    Path(gate).touch()
    while Path(gate).exists():  # until the test kills the process, or removes the gate
        time.sleep(0.05)


def checked_reapply(workspace: Path, plan: list[FileRestore], store_url: str | None = None) -> list[tuple[Path, FileRestore]]:
    """The inverse of `checked_restore`, for redo --files: every file checked, nothing written; TimeTravelError
    names the first one no longer as undo left it (someone changed it since). Acts on the path itself, never
    through a link, as restore does; `write_reapplied` then writes."""
    sandbox = Sandbox.of(workspace, store_url)
    targets = []
    for target, item, current in _as_they_are(sandbox, plan, "redo"):
        item.seen = digest(current)
        if current == item.after:
            item.action = "unchanged"  # already as the turns left it (an earlier redo was interrupted after writing)
        elif current == item.before:
            item.action = "deleted" if item.after is None else "reapplied"
        else:
            raise TimeTravelError(
                f"{item.path} was changed after undo put it back as it was before turn {item.turn_number}; "
                "redo --files refuses to overwrite it. Put it back by hand, or redo without --files"
            )
        targets.append((target, item))
    return targets


def write_reapplied(workspace: Path, targets: list[tuple[Path, FileRestore]]) -> list[FileRestore]:
    """Write what `checked_reapply` decided, each file re-read just before its write (`_still_as_seen`)."""
    for target, item in targets:
        missing = [d for d in item.created_dirs if not os.path.lexists(workspace / d)]
        if item.action in ("deleted", "reapplied") and not _still_as_seen(target, item, "redo"):
            item.action = REFUSED
        elif item.action == "deleted":
            target.unlink(missing_ok=True)
        elif item.action == "reapplied":
            write_exact(target, item.after or "")  # makes the directories the write had made
            item.recreated_dirs = missing
    return [item for _, item in targets]


def reapplied_rows(plan: list[FileRestore]) -> list[dict[str, str]]:
    """What `redo --files` did: the directories it re-created, then file by file (as FilesReapplied records it), in
    the order a reader expects them made; undo's rows end with the directories it removed, for the same reason."""
    made = [{"path": d, "action": "created directory"} for p in plan for d in p.recreated_dirs]
    return made + [{"path": p.path, "action": p.action} for p in plan]


def files_left_undone(store: ChronicleStore, session: Session, turn_ids: list[UUID], workspace: Path | None = None) -> list[str]:
    """The files these turns wrote that the workspace still holds as they were before them (as
    `undo --files` left them), so a plain redo can say the conversation and the files disagree. Looked for where that
    undo wrote them (its TurnsUndone's `workspace`, an `undo --files --workspace DIR` one elsewhere than the session's),
    unless `workspace` is given."""
    root = (workspace or undone_in(store, session.id, turn_ids) or Path(session.spec.workspace or ".")).expanduser()
    if not root.is_dir():
        return []
    sandbox = Sandbox.of(root.resolve(), store.url)
    left = []
    for item in restoration_plan(store, turn_ids):
        try:
            current = _current(sandbox.lexical(item.path), item.path, "redo")
        except (ToolError, TimeTravelError, OSError):
            continue  # a link or a non-file in its place: redo --files would refuse it and say why
        if current == item.before and current != item.after:
            left.append(item.path)
    return left


def undone_in(store: ChronicleStore, session_id: UUID, turn_ids: list[UUID]) -> Path | None:
    """The workspace the last undo of exactly these turns put their files back in; None if it was a plain undo."""
    last = None
    for _, event in store.events_with_positions([session_id], topic_suffix=".TurnsUndone"):
        if list(event.turn_ids) == list(turn_ids):
            last = event
    return Path(last.workspace) if last is not None and getattr(last, "workspace", None) else None


@dataclass
class RedoResult(UndoResult):
    """What redo --files did; as UndoResult."""


def redo_with_files(store: ChronicleStore, session_id: UUID, workspace: Path | None = None, clock: Clock = SYSTEM_CLOCK,
                    actor: str | None = None) -> RedoResult:
    """Put the last undone turns back on the branch and their files back as they left them.

    As undo does: every file checked first (one changed since refuses, nothing recorded), then the
    redo recorded saying the files are owed, then the files written and FilesReapplied recorded; a
    crash in between is finished by `resume` (`finish_owed`). Under the session's lease, as undo --files is."""
    with _files_lease(store, session_id, "redo", clock) as keeper:
        return _redo_with_files(store, session_id, workspace, clock, actor, keeper)


def _redo_with_files(store: ChronicleStore, session_id: UUID, workspace: Path | None, clock: Clock, actor: str | None,
                     keeper: LeaseKeeper) -> RedoResult:
    finished, finished_refused = finish_owed_first(store, session_id, clock, held=True)
    session = store.session(session_id)
    try:
        store.session(session_id).redo(clock.now())  # validates on a copy that is never saved
    except DomainError as exc:
        raise TimeTravelError(pasteable_in(str(exc), store.url)) from None
    redone = list(session.redo_stack[-1])
    root = files_root(session, workspace)
    plan = restoration_plan(store, redone)
    checked = checked_reapply(root, plan, store_url=store.url)

    def change(s: Session) -> None:
        if not s.redo_stack or list(s.redo_stack[-1]) != redone:
            raise TimeTravelError(f"session {session_id} changed while redoing; run redo again")
        s.redo(clock.now(), actor=recorded_actor(actor), files=bool(plan), workspace=str(root) if plan else None)

    store.update_session(session_id, change)
    if plan:
        test_halt_before_file_writes()
        _lost(session_id, "redo", keeper, store)
        write_reapplied(root, checked)
        store.update_session(session_id, lambda s: s.record_files_reapplied(redone, reapplied_rows(plan), clock.now()))
    return RedoResult(redone, plan, finished, finished_refused)


def redo(store: ChronicleStore, session_id: UUID, clock: Clock = SYSTEM_CLOCK, actor: str | None = None) -> list[UUID]:
    try:
        before = len(store.session(session_id).head)
        after = store.update_session(session_id, lambda s: s.redo(clock.now(), actor=recorded_actor(actor)))
        return list(after.head[before:])
    except DomainError as exc:
        raise TimeTravelError(pasteable_in(str(exc), store.url)) from None
