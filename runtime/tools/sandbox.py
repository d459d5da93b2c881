"""What a tool may see and touch: the workspace (never through a link out of it), never the store.

One set of rules for every file tool, every tree walk and undo's file restore, so that a walk
cannot reach what a direct read is refused (a symlink out of the workspace, the event store's
SQLite files, the `.chronicle/` directory). The store is protected whatever `--db` says: the
agent that could rewrite its own log could rewrite its history, its approvals and its budget.
`chronicle.toml` may be read but never written by a file tool: it holds the limits and the
environment variables tools receive, which the agent must not widen for itself.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .base import ToolError

STORE_DIR = ".chronicle"
CONFIG_FILE = "chronicle.toml"
SQLITE_SIDE_FILES = ("", "-wal", "-shm", "-journal")
SKIP_DIRS = {".git", STORE_DIR, ".venv", "__pycache__", "node_modules"}
ESCAPED_BYTE = re.compile(r"\\x([0-9a-fA-F]{2})")


class ConfinementError(ToolError):
    """A path the tools may not use; the message names it relative to the workspace, and why."""


def store_files(url: str | None) -> tuple[Path, ...]:
    """The files of a SQLite store named by a database URL (none for PostgreSQL)."""
    if not url or not url.startswith("sqlite:"):
        return ()
    from chronicle.runtime.config import ConfigError, sqlite_path

    try:
        base = sqlite_path(url)  # relative URLs are relative to the current directory, as the store opens them
    except ConfigError:
        return ()
    if base is None:
        return ()
    return tuple(Path(f"{base}{suffix}") for suffix in SQLITE_SIDE_FILES)


def display(path: Path | str) -> str:
    """A path as text the model and the store can hold: undecodable bytes of a name become \\xNN."""
    return os.fsencode(str(path)).decode("utf-8", errors="backslashreplace")


@dataclass(frozen=True)
class Sandbox:
    """The workspace root and the paths no tool may use, resolved once."""

    workspace: Path
    protected: tuple[Path, ...] = ()
    _inodes: frozenset[tuple[int, int]] = field(default=frozenset(), repr=False)

    @classmethod
    def of(cls, workspace: Path, store_url: str | None = None, extra: tuple[Path, ...] = ()) -> Sandbox:
        root = workspace.expanduser().resolve()
        paths = [root / STORE_DIR, *store_files(store_url), *extra]
        resolved = tuple(dict.fromkeys(_resolve(p) for p in paths))
        inodes = set()
        for path in resolved:
            try:
                st = path.stat()
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                inodes.add((st.st_dev, st.st_ino))
        return cls(root, resolved, frozenset(inodes))

    # -- checks ----------------------------------------------------------------------------

    def rel(self, path: Path) -> str:
        """The path relative to the workspace, for messages: the absolute root is never shown."""
        try:
            return display(path.relative_to(self.workspace)) or "."
        except ValueError:
            return display(path.name)

    def is_protected(self, resolved: Path) -> bool:
        if any(resolved == p or resolved.is_relative_to(p) for p in self.protected):
            return True
        try:
            st = resolved.stat()
        except OSError:
            return False
        return stat.S_ISREG(st.st_mode) and (st.st_dev, st.st_ino) in self._inodes  # a hard link to the store

    def check(self, resolved: Path, shown: str) -> Path:
        if resolved != self.workspace and not resolved.is_relative_to(self.workspace):
            raise ConfinementError(f"path {shown!r} resolves outside the workspace; access refused")
        if self.is_protected(resolved):
            raise ConfinementError(
                f"path {shown!r} is part of Chronicle's event store; tools may not read or change it"
            )
        return resolved

    def confine(self, relative: str) -> Path:
        """Resolve a path inside the workspace, following links only where they stay inside."""
        if "\x00" in relative:
            raise ConfinementError(f"path {relative!r} contains a NUL character")
        if Path(relative).is_absolute():
            raise ConfinementError(f"path {relative!r} is absolute; use a path relative to the workspace")
        return self.check(_resolve(self.workspace / _undisplay(self.workspace, relative)), relative)

    def confine_for_write(self, relative: str) -> Path:
        target = self.confine(relative)
        if target == self.workspace / CONFIG_FILE:
            raise ConfinementError(
                f"{CONFIG_FILE} holds the limits and tool settings of this workspace; tools may not change it"
            )
        return target

    def lexical(self, relative: str) -> Path:
        """The path itself, never through a link in its last component: for undo's restore.

        The directories above it are resolved and confined; the entry itself is returned as is,
        so the caller can see whether a link has replaced the file it wrote."""
        if Path(relative).is_absolute() or ".." in Path(relative).parts:
            raise ConfinementError(f"path {relative!r} is not a plain path inside the workspace")
        parent = self.confine(str(Path(relative).parent))
        target = parent / _undisplay(parent, Path(relative).name)
        if self.is_protected(target):
            raise ConfinementError(f"path {relative!r} is part of Chronicle's event store; tools may not read or change it")
        return target

    # -- walks -----------------------------------------------------------------------------

    def walk(self, top: Path) -> Iterator[Path]:
        """Every regular file under `top`, sorted, never following a directory link; files that
        are links are yielded only when they resolve inside the workspace and are not protected."""
        for dirpath, dirnames, filenames in os.walk(top, followlinks=False):
            here = Path(dirpath)
            dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS and self._allowed(here / d, is_dir=True))
            for name in sorted(filenames):
                path = here / name
                if self._allowed(path, is_dir=False):
                    yield path

    def _allowed(self, path: Path, is_dir: bool) -> bool:
        try:
            st = path.lstat()
        except OSError:
            return False
        if stat.S_ISLNK(st.st_mode):
            if is_dir:
                return False  # like ripgrep and find: a walk does not descend into linked directories
            try:
                self.check(_resolve(path), "")
            except ConfinementError:
                return False
            return path.is_file()
        if self.is_protected(path):
            return False
        return stat.S_ISDIR(st.st_mode) if is_dir else stat.S_ISREG(st.st_mode)


def _undisplay(root: Path, relative: str) -> str:
    """The file a name shown with \\xNN escapes (display()) stands for, when only that one exists."""
    if "\\x" not in relative or os.path.lexists(root / relative):
        return relative
    raw = ESCAPED_BYTE.sub(lambda m: chr(0xDC00 + int(m.group(1), 16)) if int(m.group(1), 16) >= 0x80 else m.group(0), relative)
    return raw if os.path.lexists(root / raw) else relative


def _resolve(path: Path) -> Path:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop: keep the lexical path, which the checks then refuse or miss
        return Path(os.path.abspath(path))
