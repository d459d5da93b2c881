"""Chronicle's own tools an agent has only when its tools name them: none is a default tool, and the tool editions
(runtime/tools/editions.py) do not cover them (a session recorded before one existed cannot have named it)."""

from __future__ import annotations

from .base import Tool
from .memory import MEMORY_TOOLS
from .notes import NOTES_TOOLS

OPT_IN_TOOLS: dict[str, type[Tool]] = {**NOTES_TOOLS, **MEMORY_TOOLS}


def opt_in_listed() -> str:
    """How an unknown-tool message names them."""
    return f"the shared notes' {', '.join(NOTES_TOOLS)}, the memory tools' {', '.join(MEMORY_TOOLS)}"
