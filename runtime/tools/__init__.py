"""Built-in tools and the registry that maps names to them."""

from __future__ import annotations

from .base import Tool
from .files import EditFile, Glob, Grep, ListDir, ReadFile, WriteFile
from .shell import Bash

BUILTIN_TOOLS: dict[str, type[Tool]] = {
    cls.name: cls for cls in (ReadFile, ListDir, Glob, Grep, WriteFile, EditFile, Bash)
}
DEFAULT_TOOLS = tuple(BUILTIN_TOOLS)
READ_ONLY_TOOLS = tuple(name for name, cls in BUILTIN_TOOLS.items() if cls.read_only)
