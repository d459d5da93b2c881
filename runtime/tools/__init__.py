"""Built-in tools and the registry that maps names to them."""

from __future__ import annotations

from pathlib import Path

from .base import Tool, Toolbox
from .files import EditFile, Glob, Grep, ListDir, ReadFile, WriteFile
from .shell import Bash

BUILTIN_TOOLS: dict[str, type[Tool]] = {
    cls.name: cls for cls in (ReadFile, ListDir, Glob, Grep, WriteFile, EditFile, Bash)
}
DEFAULT_TOOLS = tuple(BUILTIN_TOOLS)
READ_ONLY_TOOLS = tuple(name for name, cls in BUILTIN_TOOLS.items() if cls.read_only)


def toolbox_for(names: tuple[str, ...] | list[str], workspace: Path | None = None) -> Toolbox:
    """Built-ins by name, the user's tools by import path (runtime/tools/imports.py); a ToolLoadError (a ValueError) names what is wrong."""
    return Toolbox(resolve_tools(names, workspace))


def resolve_tools(names: tuple[str, ...] | list[str], workspace: Path | None = None) -> list[Tool]:
    from chronicle.runtime.agents.tools import ORCHESTRATION_TOOLS  # imported late: it drives AgentLoop
    from chronicle.runtime.skills import LoadSkill

    from .imports import ToolLoadError, is_import_path, load_tools

    known = {**BUILTIN_TOOLS, **ORCHESTRATION_TOOLS, LoadSkill.name: LoadSkill}
    unknown = [n for n in names if n not in known and not is_import_path(n)]
    if unknown:
        raise ToolLoadError(f"unknown tool(s): {', '.join(unknown)}; built-in tools are {', '.join(BUILTIN_TOOLS)}, "
                         "and your own are named by import path (package.module:attribute)")
    tools: list[Tool] = []
    for name in names:
        tools.extend(load_tools(name, workspace) if is_import_path(name) else [known[name]()])
    names_seen = [t.name for t in tools]
    clash = next((n for n in names_seen if names_seen.count(n) > 1), None)
    if clash:
        raise ToolLoadError(f"two tools are named {clash!r}; give one another name (@tool(name=...))")
    return tools
