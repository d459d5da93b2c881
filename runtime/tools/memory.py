"""The memory tools (seeds 000 and 003): memory_search and memory_get, over the workspace's memory.

The workspace's memory is MEMORY.md (recorded whole on a top-level session's spec when it starts) and the files
under memory/: the daily logs `compact --strategy workspace` moves older turns to (`memory/YYYY-MM-DD.md`) and
whatever the team keeps there. After such a compaction the model reads a pointer to a daily log; these tools let
it find what it needs in all of them without being given the whole workspace (`read_file`, `grep`): an agent whose
tools name them may read memory, and nothing else of the workspace through them. Paths outside MEMORY.md and
memory/ are refused; links are not followed out of the workspace (the sandbox's rules, as for the file tools).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from pydantic import BaseModel, Field

from .base import Tool, ToolContext, ToolError, ToolOutput, truncate
from .fileio import read_for_display

MEMORY_FILE = "MEMORY.md"
MEMORY_DIR = "memory"


def _memory_files(ctx: ToolContext) -> list[Path]:
    """MEMORY.md, then memory/'s text files newest name first (daily logs are named by their date)."""
    root = ctx.sandbox.workspace
    found = [p for p in (root / MEMORY_FILE,) if p.is_file() and not p.is_symlink()]
    directory = root / MEMORY_DIR
    if directory.is_dir() and not directory.is_symlink():
        found += sorted((p for p in ctx.sandbox.walk(directory) if p.suffix in (".md", ".txt")), reverse=True)
    return found


def _in_memory(relative: str) -> bool:
    parts = Path(relative).parts
    return relative == MEMORY_FILE or (len(parts) > 1 and parts[0] == MEMORY_DIR and ".." not in parts)


class MemorySearch(Tool):
    name = "memory_search"
    description = ("Search the workspace's memory (MEMORY.md and the files under memory/, such as the daily logs older "
                   "turns were moved to) for lines holding every word of the query, case-insensitively; returns "
                   "path:line: text, newest files first. memory_get reads a file around a line.")
    read_only = idempotent = parallel_safe = True

    class Input(BaseModel):
        query: str = Field(min_length=1, description="Words that must all appear on the line")
        limit: int = Field(20, ge=1, le=200, description="At most this many lines")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        words = args.query.casefold().split()
        if not words:
            raise ToolError("memory_search needs at least one word to look for")
        return ToolOutput(await asyncio.to_thread(self._search, ctx, words, args.limit))

    @staticmethod
    def _search(ctx: ToolContext, words: list[str], limit: int) -> str:
        files = _memory_files(ctx)
        if not files:
            return "no memory yet: the workspace has no MEMORY.md and no files under memory/"
        hits: list[str] = []
        for path in files:
            shown = ctx.sandbox.rel(path)
            try:
                text = read_for_display(path, shown)
            except ToolError:
                continue  # a binary file under memory/ is no memory the model can read
            for number, line in enumerate(text.splitlines(), 1):
                if all(w in line.casefold() for w in words):
                    hits.append(f"{shown}:{number}: {line.strip()}")
                    if len(hits) >= limit:
                        return truncate("\n".join(hits) + f"\n[the first {limit} matching lines; narrow the query or raise limit]")
        if not hits:
            return f"no line of {len(files)} memory file(s) holds all of: {' '.join(words)}"
        return truncate("\n".join(hits))


class MemoryGet(Tool):
    name = "memory_get"
    description = ("Read a memory file: MEMORY.md or a file under memory/ (as memory_search names it), from a line "
                   "(numbered from 1), for some lines.")
    read_only = idempotent = parallel_safe = True

    class Input(BaseModel):
        path: str = Field(description="MEMORY.md or memory/NAME, relative to the workspace")
        from_line: int = Field(1, ge=1, description="First line to return, from 1")
        lines: int = Field(200, ge=1, le=2000, description="How many lines to return")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        relative = args.path.strip().removeprefix("./")
        if not _in_memory(relative):
            raise ToolError(f"{args.path} is not memory: memory_get reads {MEMORY_FILE} and files under {MEMORY_DIR}/ "
                            "(memory_search names them)")
        target = ctx.sandbox.confine(relative)
        if not target.is_file():
            raise ToolError(f"no such memory file: {args.path}")
        text = await asyncio.to_thread(read_for_display, target, relative)
        selected = text.splitlines()[args.from_line - 1: args.from_line - 1 + args.lines]
        if not selected:
            raise ToolError(f"{relative} has {len(text.splitlines())} line(s); from_line {args.from_line} is past its end")
        return ToolOutput(truncate("\n".join(f"{n}: {line}" for n, line in enumerate(selected, args.from_line))))


MEMORY_TOOLS: dict[str, type[Tool]] = {cls.name: cls for cls in (MemorySearch, MemoryGet)}
