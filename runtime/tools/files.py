"""File tools confined to the workspace. Writers record before/after content so undo can restore it."""

from __future__ import annotations

import asyncio
import fnmatch
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from .base import Tool, ToolContext, ToolError, ToolOutput, confine, truncate

SKIP_DIRS = {".git", ".chronicle", ".venv", "__pycache__", "node_modules"}


def _rel(ctx: ToolContext, path: Path) -> str:
    return str(path.relative_to(ctx.workspace.resolve())) or "."


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    for path in sorted(root.rglob("*")):
        if any(part in SKIP_DIRS for part in path.relative_to(root).parts):
            continue
        if path.is_file():
            found.append(path)
    return found


class ReadFile(Tool):
    name = "read_file"
    description = "Read a text file in the workspace. Lines are numbered from 1; use offset/limit for long files."
    read_only = idempotent = parallel_safe = True

    class Input(BaseModel):
        path: str = Field(description="Path relative to the workspace")
        offset: int = Field(0, ge=0, description="First line to return, counted from 0")
        limit: int | None = Field(None, ge=1, description="How many lines to return")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        target = confine(ctx.workspace, args.path)
        if not target.is_file():
            raise ToolError(f"no such file: {args.path}")
        text = await asyncio.to_thread(target.read_text, encoding="utf-8", errors="replace")
        lines = text.splitlines()
        end = len(lines) if args.limit is None else args.offset + args.limit
        selected = lines[args.offset:end]
        return ToolOutput(truncate("\n".join(selected)))


class ListDir(Tool):
    name = "list_dir"
    description = "List a directory in the workspace; directories end with '/'."
    read_only = idempotent = parallel_safe = True

    class Input(BaseModel):
        path: str = Field(".", description="Directory relative to the workspace")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        target = confine(ctx.workspace, args.path)
        if not target.is_dir():
            raise ToolError(f"no such directory: {args.path}")
        entries = sorted(p.name + ("/" if p.is_dir() else "") for p in target.iterdir() if p.name not in SKIP_DIRS)
        return ToolOutput(truncate("\n".join(entries)) if entries else "(empty directory)")


class Glob(Tool):
    name = "glob"
    description = "Find workspace files whose relative path matches a glob pattern such as '**/*.py'."
    read_only = idempotent = parallel_safe = True

    class Input(BaseModel):
        pattern: str

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        if Path(args.pattern).is_absolute() or ".." in Path(args.pattern).parts:
            raise ToolError(f"pattern {args.pattern!r} reaches outside the workspace")
        root = ctx.workspace.resolve()
        files = await asyncio.to_thread(_walk, root)
        matches = [_rel(ctx, p) for p in files if fnmatch.fnmatch(_rel(ctx, p), args.pattern)
                   or Path(_rel(ctx, p)).match(args.pattern)]
        return ToolOutput(truncate("\n".join(matches)) if matches else "no files match")


class Grep(Tool):
    name = "grep"
    description = "Search workspace files for a regular expression; prints path:line:text."
    read_only = idempotent = parallel_safe = True

    class Input(BaseModel):
        pattern: str
        path: str = Field(".", description="File or directory to search, relative to the workspace")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        try:
            regex = re.compile(args.pattern)
        except re.error as exc:
            raise ToolError(f"invalid regular expression {args.pattern!r}: {exc}") from None
        target = confine(ctx.workspace, args.path)
        if not target.exists():
            raise ToolError(f"no such file or directory: {args.path}")

        def search() -> list[str]:
            files = [target] if target.is_file() else _walk(target)
            hits = []
            for path in files:
                try:
                    text = path.read_text(encoding="utf-8")
                except (UnicodeDecodeError, OSError):
                    continue
                for number, line in enumerate(text.splitlines(), 1):
                    if regex.search(line):
                        hits.append(f"{_rel(ctx, path)}:{number}:{line}")
            return hits

        hits = await asyncio.to_thread(search)
        return ToolOutput(truncate("\n".join(hits)) if hits else "no matches")


def _effect(ctx: ToolContext, target: Path, before: str | None, after: str) -> dict[str, Any]:
    return {"kind": "file", "path": _rel(ctx, target), "before": before, "after": after}


class WriteFile(Tool):
    name = "write_file"
    description = "Create or overwrite a text file in the workspace."

    class Input(BaseModel):
        path: str
        content: str

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        target = confine(ctx.workspace, args.path)
        if target.is_dir():
            raise ToolError(f"{args.path} is a directory")
        before = target.read_text(encoding="utf-8") if target.exists() else None
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(args.content, encoding="utf-8")
        verb = "created" if before is None else "overwrote"
        return ToolOutput(f"{verb} {args.path} ({len(args.content)} characters)", effects=[_effect(ctx, target, before, args.content)])


class EditFile(Tool):
    name = "edit_file"
    description = "Replace one exact occurrence of `old` with `new` in a workspace file."

    class Input(BaseModel):
        path: str
        old: str = Field(min_length=1)
        new: str

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        target = confine(ctx.workspace, args.path)
        if not target.is_file():
            raise ToolError(f"no such file: {args.path}")
        before = target.read_text(encoding="utf-8")
        count = before.count(args.old)
        if count == 0:
            raise ToolError(f"`old` text not found in {args.path}")
        if count > 1:
            raise ToolError(f"`old` text occurs {count} times in {args.path}; include more context to make it unique")
        after = before.replace(args.old, args.new, 1)
        target.write_text(after, encoding="utf-8")
        return ToolOutput(f"edited {args.path}", effects=[_effect(ctx, target, before, after)])
