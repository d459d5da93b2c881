"""The workspace as a replayed turn saw it: a scratch copy rolled back, then rolled forward.

Read-only tools re-run during a replay. Against today's workspace, a session that read a file
and later edited it could never replay identical: the read would see the edit. So the replay
works on a scratch copy of the workspace in which every file the session's tools changed is
put back as it was before the session first changed it (the recorded `before` of the first
effect on that path), and then moves forward with the recording: a writer's recorded effects
are applied when the replay reuses its result, and the turns that are no longer on the branch
(undone) are applied, with their `undo --files` restorations, where they happened between the
turns that are replayed.

What cannot be rolled back is said plainly in docs/history.md: changes `bash` made (not recorded file by
file), changes by other sessions or by hand to files this session never wrote, and the
directories a walk skips (`.git`, `.venv`, `node_modules`, `__pycache__`, `.chronicle`), which are
not copied.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from chronicle.domain.session import Session

from ..store import ChronicleStore
from ..timetravel import inherited_turns
from ..tools.base import ToolError
from ..tools.fileio import write_exact
from ..tools.sandbox import SKIP_DIRS, Sandbox
from ..undo_redo import remove_empty_dirs, restoration_plan

#: A change to one file: its path relative to the workspace and its content after (None = absent);
#: a path ending in "/" with None is a directory removed if empty (undo --files after a write made it).
Change = tuple[str, "str | None"]


def file_effects(store: ChronicleStore, turn_ids: Iterable[UUID]) -> list[dict[str, Any]]:
    """The recorded file effects of these turns' completed tool calls, in the order they ran."""
    effects: list[dict[str, Any]] = []
    for tid in turn_ids:
        for call in store.tool_calls_of(store.turn(tid)):
            if call.status == "completed":
                effects.extend(e for e in call.effects if e.get("kind") == "file")
    return effects


@dataclass
class ScratchWorkspace:
    """A throwaway copy of a session's workspace that follows the recording turn by turn."""

    root: Path
    #: Changes to apply just before the replay starts the head turn with this id.
    before_turn: dict[UUID, list[Change]] = field(default_factory=dict)

    @classmethod
    def prepare(cls, store: ChronicleStore, session: Session, source: Path, target: Path) -> ScratchWorkspace:
        _copy_tree(source, target, Sandbox.of(source, store.url))
        scratch = cls(target)
        inherited = inherited_turns(store, session)
        own = list(session.turns)
        first: dict[str, dict[str, Any]] = {}
        for effect in file_effects(store, [*inherited, *own]):
            first.setdefault(effect["path"], effect)
        scratch.apply([(path, e.get("before")) for path, e in first.items()])
        made = [d for e in first.values() if e.get("before") is None for d in reversed(e.get("created_dirs") or [])]
        scratch.apply([(d + "/", None) for d in made])
        scratch.before_turn = _off_branch_changes(store, session, set(session.head))
        return scratch

    def apply(self, changes: Iterable[Change]) -> None:
        sandbox = Sandbox.of(self.root)
        for path, content in changes:
            if path.endswith("/") and content is None:
                remove_empty_dirs(sandbox, [path.rstrip("/")])
                continue
            try:
                target = sandbox.lexical(path)
            except ToolError:
                continue  # a path the tools could not have written here either
            if content is None:
                if target.is_file() or target.is_symlink():
                    target.unlink()
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                if target.is_symlink():
                    target.unlink()
                write_exact(target, content)

    def apply_effects(self, effects: Iterable[dict[str, Any]]) -> None:
        self.apply((e["path"], e.get("after")) for e in effects if e.get("kind") == "file")

    def enter_turn(self, turn_id: UUID) -> None:
        self.apply(self.before_turn.get(turn_id, []))


def _off_branch_changes(store: ChronicleStore, session: Session, head: set[UUID]) -> dict[UUID, list[Change]]:
    """The file changes of turns no longer on the branch (and of their restorations), keyed by
    the head turn that started next: the original ran them, so its later reads saw them."""
    pending: list[Change] = []
    out: dict[UUID, list[Change]] = {}
    for _, event in store.events_with_positions([session.id]):
        kind = type(event).__name__
        if kind == "TurnStarted":
            turn_id = event.turn_id  # type: ignore[attr-defined]
            if turn_id in head:
                if pending:
                    out[turn_id] = pending
                    pending = []
            else:
                pending.extend((e["path"], e.get("after")) for e in file_effects(store, [turn_id]))
        elif kind == "FilesRestored":
            rows = event.files  # type: ignore[attr-defined]
            restored = {f["path"] for f in rows if f.get("action") in ("restored", "deleted")}
            plan = restoration_plan(store, list(event.turn_ids))  # type: ignore[attr-defined]
            pending.extend((item.path, item.before) for item in plan if item.path in restored)
            pending.extend((f["path"] + "/", None) for f in rows if f.get("action") == "removed directory")
        elif kind == "FilesReapplied":  # redo --files: back as the redone turns left them
            rows = event.files  # type: ignore[attr-defined]
            reapplied = {f["path"] for f in rows if f.get("action") in ("reapplied", "deleted")}
            plan = restoration_plan(store, list(event.turn_ids))  # type: ignore[attr-defined]
            pending.extend((item.path, item.after) for item in plan if item.path in reapplied)
    return out


def _copy_tree(source: Path, target: Path, sandbox: Sandbox) -> None:
    """Copy the workspace, links as links, leaving out the store and the directories walks skip."""
    target.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(source, followlinks=False):
        here = Path(dirpath)
        there = target / here.relative_to(source)
        keep = []
        for name in dirnames:
            path = here / name
            if name in SKIP_DIRS or sandbox.is_protected(path):
                continue
            if path.is_symlink():
                filenames.append(name)  # copied as a link, never descended into
            else:
                keep.append(name)
                (there / name).mkdir(exist_ok=True)
        dirnames[:] = keep
        for name in filenames:
            path = here / name
            if sandbox.is_protected(path):
                continue
            try:
                if path.is_symlink():
                    os.symlink(os.readlink(path), there / name)
                elif path.is_file():
                    shutil.copy2(path, there / name)
            except OSError:
                continue  # unreadable here: the replayed read fails as the tool would say, and is named
