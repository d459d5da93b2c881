"""File tools confined to the workspace. Writers record before/after content so undo can restore it.

Every path goes through the context's Sandbox (sandbox.py): the same confinement for a direct
read, a walk, a write and undo. Contents are exact bytes (fileio.py), so the recorded
before/after are the files as they were.
"""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .base import Tool, ToolContext, ToolError, ToolOutput, truncate
from .fileio import read_exact, read_for_display, write_exact
from .sandbox import SKIP_DIRS, display
from .search import Glob, Grep

__all__ = ["EditFile", "Glob", "Grep", "ListDir", "ReadFile", "WriteFile"]


class ReadFile(Tool):
    name = "read_file"
    description = "Read a text file in the workspace. Lines are numbered from 1; use offset/limit for long files."
    read_only = idempotent = parallel_safe = True

    class Input(BaseModel):
        path: str = Field(description="Path relative to the workspace")
        offset: int = Field(0, ge=0, description="First line to return, counted from 0")
        limit: int | None = Field(None, ge=1, description="How many lines to return")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        target = ctx.sandbox.confine(args.path)
        if not target.is_file():
            raise ToolError(f"no such file: {args.path}")
        text = await asyncio.to_thread(read_for_display, target, args.path)
        lines = text.splitlines()
        end = len(lines) if args.limit is None else args.offset + args.limit
        selected = lines[args.offset:end]
        return ToolOutput(truncate("\n".join(selected)))


class ListDir(Tool):
    name = "list_dir"
    description = "List a directory in the workspace; directories end with '/', symbolic links with '@'."
    read_only = idempotent = parallel_safe = True

    class Input(BaseModel):
        path: str = Field(".", description="Directory relative to the workspace")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        target = ctx.sandbox.confine(args.path)
        if not target.is_dir():
            raise ToolError(f"no such directory: {args.path}")
        entries = await asyncio.to_thread(_entries, ctx, target)
        return ToolOutput(truncate("\n".join(entries)) if entries else "(empty directory)")


def _entries(ctx: ToolContext, directory: Path) -> list[str]:
    """Names as the directory holds them, links not followed; the store's files are left out."""
    shown = []
    for entry in os.scandir(directory):
        path = Path(entry.path)
        if entry.name in SKIP_DIRS or ctx.sandbox.is_protected(path):
            continue
        try:
            mode = entry.stat(follow_symlinks=False).st_mode
        except OSError:
            continue
        suffix = "@" if stat.S_ISLNK(mode) else "/" if stat.S_ISDIR(mode) else ""
        shown.append(display(entry.name) + suffix)
    return sorted(shown)


def _effect(ctx: ToolContext, target: Path, before: str | None, after: str, created_dirs: list[Path] | None = None) -> dict[str, Any]:
    effect = {"kind": "file", "path": ctx.sandbox.rel(target), "before": before, "after": after}
    if created_dirs:
        # undo --files removes these again (if they are empty by then): a write that made them is undone whole.
        effect["created_dirs"] = [ctx.sandbox.rel(d) for d in created_dirs]
    return effect


def _missing_dirs(target: Path) -> list[Path]:
    """The directories above `target` that do not exist yet, outermost first: the write creates them."""
    missing = []
    parent = target.parent
    while not parent.exists() and parent != parent.parent:
        missing.append(parent)
        parent = parent.parent
    return missing[::-1]


class WriteFile(Tool):
    name = "write_file"
    description = "Create or overwrite a text file (UTF-8) in the workspace with exactly the given content."

    class Input(BaseModel):
        path: str
        content: str

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        target = ctx.sandbox.confine_for_write(args.path)
        if target.is_dir():
            raise ToolError(f"{args.path} is a directory")
        before = read_exact(target, args.path, "write_file") if target.exists() else None
        created_dirs = _missing_dirs(target)
        write_exact(target, args.content)  # no await between the write and its effect: a cancel cannot come between
        verb = "created" if before is None else "overwrote"
        effect = _effect(ctx, target, before, args.content, created_dirs)
        return ToolOutput(f"{verb} {args.path} ({len(args.content)} characters)", effects=[effect])


class EditFile(Tool):
    name = "edit_file"
    description = (
        "Replace one exact occurrence of `old` with `new` in a workspace text file. "
        "The file's line endings (LF or CRLF) and final newline are kept."
    )

    class Input(BaseModel):
        path: str
        old: str = Field(min_length=1)
        new: str

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        target = ctx.sandbox.confine_for_write(args.path)
        if not target.is_file():
            raise ToolError(f"no such file: {args.path}")
        before = read_exact(target, args.path, "edit_file")
        old, new = args.old, args.new
        if before.count(old) == 0 and "\r\n" in before and "\n" in old:
            # The model sees lines, not their endings: in a CRLF file, match and write CRLF.
            old, new = _crlf(old), _crlf(new)
        count = before.count(old)
        if count == 0:
            raise ToolError(f"`old` text not found in {args.path}")
        if count > 1:
            raise ToolError(f"`old` text occurs {count} times in {args.path}; include more context to make it unique")
        after = before.replace(old, new, 1)
        write_exact(target, after)  # as in write_file
        return ToolOutput(f"edited {args.path}", effects=[_effect(ctx, target, before, after)])


def _crlf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\n", "\r\n")
