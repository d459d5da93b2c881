"""Built-in tools and the registry that maps names to them."""

from __future__ import annotations

from .base import Tool, Toolbox
from .files import EditFile, Glob, Grep, ListDir, ReadFile, WriteFile
from .shell import Bash

BUILTIN_TOOLS: dict[str, type[Tool]] = {
    cls.name: cls for cls in (ReadFile, ListDir, Glob, Grep, WriteFile, EditFile, Bash)
}
DEFAULT_TOOLS = tuple(BUILTIN_TOOLS)
READ_ONLY_TOOLS = tuple(name for name, cls in BUILTIN_TOOLS.items() if cls.read_only)


def toolbox_for(names: tuple[str, ...] | list[str]) -> Toolbox:
    from chronicle.runtime.agents.tools import ORCHESTRATION_TOOLS  # imported late: it drives AgentLoop
    from chronicle.runtime.skills import LoadSkill

    known = {**BUILTIN_TOOLS, **ORCHESTRATION_TOOLS, LoadSkill.name: LoadSkill}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown tool(s): {', '.join(unknown)}; built-in tools are {', '.join(BUILTIN_TOOLS)}")
    return Toolbox([known[n]() for n in names])
