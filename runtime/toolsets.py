"""Tool names to tools: built-ins, the orchestration tools (delegate & co.), load_skill, the user's
tools by import path, and the MCP tools a spec recorded.

Kept outside runtime/tools/ so that the tools package never imports the agents package (whose
orchestration tools import the tools' base classes): no import cycle between them.
"""

from __future__ import annotations

from pathlib import Path

from chronicle.domain.agent_spec import AgentSpec

from .agents.tools import ORCHESTRATION_TOOLS
from .skills import LoadSkill
from .tools import BUILTIN_TOOLS
from .tools.base import Tool, Toolbox
from .tools.imports import ToolGone, ToolLoadError, is_import_path, load_tools
from .tools.opt_in import OPT_IN_TOOLS, opt_in_listed


def toolbox_for(names: tuple[str, ...] | list[str], workspace: Path | None = None,
                gone: list[ToolGone] | None = None) -> Toolbox:
    """Built-ins by name, the user's tools by import path (runtime/tools/imports.py); a ToolLoadError (a ValueError) names what is wrong."""
    return Toolbox(resolve_tools(names, workspace, gone))


def resolve_tools(names: tuple[str, ...] | list[str], workspace: Path | None = None,
                  gone: list[ToolGone] | None = None) -> list[Tool]:
    """`gone`: for a session recorded already, whose paths may have lost their tool since (app/vanished_tools.py
    decides whether it may go on without it): each path whose module no longer has its attribute is left out and
    appended to it, instead of raised. A new session is given none, so such a path refuses it."""
    known = {**BUILTIN_TOOLS, **ORCHESTRATION_TOOLS, **OPT_IN_TOOLS, LoadSkill.name: LoadSkill}
    unknown = [n for n in names if n not in known and not is_import_path(n)]
    if unknown:
        raise ToolLoadError(f"unknown tool(s): {', '.join(unknown)}; built-in tools are {', '.join(BUILTIN_TOOLS)}, "
                            f"{opt_in_listed()}, "
                            "and your own are named by import path (package.module:attribute)")
    tools: list[Tool] = []
    for name in names:
        if not is_import_path(name):
            tools.append(known[name]())
            continue
        try:
            tools.extend(load_tools(name, workspace))
        except ToolGone as exc:
            if gone is None:
                raise
            gone.append(exc)
    names_seen = [t.name for t in tools]
    clash = next((n for n in names_seen if names_seen.count(n) > 1), None)
    if clash:
        raise ToolLoadError(f"two tools are named {clash!r}; give one another name (@tool(name=...))")
    return tools


def agent_toolbox(spec: AgentSpec, workspace: Path | None = None, gone: list[ToolGone] | None = None) -> Toolbox:
    """The spec's tools by name, described in the edition it recorded (runtime/tools/editions.py), and the
    MCP tools recorded on it (runtime/tools/mcp_tools.py). `gone`: as for `resolve_tools`."""
    tools = resolve_tools(spec.tools, workspace, gone)
    if spec.mcp_tools:
        from .tools.mcp_tools import mcp_tools

        tools.extend(mcp_tools(spec.mcp_tools))
    return Toolbox(tools, edition=spec.tool_edition)


def with_tool_names(spec: AgentSpec, workspace: Path | None = None) -> AgentSpec:
    """The spec, and each sub-agent definition of its registry, with the names its import paths hold now
    (`AgentSpec.import_tools`): recorded when a session starts, so a continued session can say which tool its
    path no longer holds (runtime/app/vanished_tools.py). A path that does not load is a ToolLoadError, as always."""
    def named(agent: AgentSpec) -> AgentSpec:
        held = {path: tuple(t.name for t in load_tools(path, workspace)) for path in agent.tools if is_import_path(path)}
        return agent.model_copy(update={"import_tools": held})

    return named(spec).model_copy(update={"registry": tuple(named(a) for a in spec.registry)})


def as_started(spec: AgentSpec) -> AgentSpec:
    """The spec a session starts with records the names its import paths hold now (`with_tool_names`), whoever built
    it: `new_spec` does for `run`, `submit`, the API and the server, but a program's own spec given to
    sessions.start_session, and chat's /new and /job (which copy a running session's, names and all, perhaps from
    before the path changed or before names were recorded) went without, or with another time's; a continued
    session was then not told which tool it goes on without. A spec with no import path is returned as it is."""
    if not any(is_import_path(tool) for agent in (spec, *spec.registry) for tool in agent.tools):
        return spec
    return with_tool_names(spec, Path(spec.workspace) if spec.workspace else None)
