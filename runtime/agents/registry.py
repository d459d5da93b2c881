"""The agent registry: named agent specs in a TOML file, resolved into recorded AgentSpecs.

The file is read once, when a top-level session starts; what it said is then recorded on the
session (the main spec and, in `registry`, every sub-agent definition), so resume and replay
never depend on the file still being there or unchanged.

    [agents.main]                       # optional: the top-level agent
    instructions = "You lead; delegate research."
    max_depth = 1                       # main at depth 0 may spawn children at depth 1

    [agents.researcher]
    description = "Reads code and reports findings"
    instructions = "Answer from the files; call task_complete when done."
    tools = ["read_file", "grep"]      # default: read_file, list_dir, glob, grep
    max_iterations = 10

    [approvals]                         # every agent's approval policy (runtime/approval_policy.py) ...
    policy = "deny"
    [agents.researcher.approvals]       # ... unless the agent has its own
    allow = ["bash"]
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, StrictStr, ValidationError, field_validator

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.effects import EffectsError, with_effects
from chronicle.runtime.memory import with_memory
from chronicle.runtime.project_files import for_subagent, with_project_files
from chronicle.runtime.skills import SkillError, configured_dirs, with_skills
from chronicle.runtime.skills import discover as discover_skills
from chronicle.runtime.tools import BUILTIN_TOOLS, DEFAULT_TOOLS, READ_ONLY_TOOLS
from chronicle.runtime.tools.editions import (
    COMPLETION_PROTOCOL_EDITION,
    LIST_TASKS_EDITION,
    SUB_AGENT_DIRECTORY_EDITION,
    TOOL_EDITION,
)
from chronicle.runtime.tools.notes import notes_protocol
from chronicle.runtime.tools.opt_in import OPT_IN_TOOLS, opt_in_listed
from chronicle.runtime.validation import EXPECTED

DEFAULT_FILE = "chronicle.toml"
MAIN = "main"
DELEGATION_TOOLS = ("list_agents", "delegate")
#: The task board's tool, given with delegate from tool edition 3 (runtime/tools/editions.py).
BOARD_TOOL = "list_tasks"
COMPLETION_TOOL = "task_complete"
ORCHESTRATION_NAMES = (*DELEGATION_TOOLS, BOARD_TOOL, COMPLETION_TOOL)

#: Seed 004's `<completion_protocol>`: a sub-agent is told, in its recorded prompt, that the agent that delegated is
#: waiting for one structured report, which task_complete makes (a final text is taken as a report only as a fallback,
#: with a caveat saying so: runtime/agents/children.py).
COMPLETION_PROTOCOL = (
    "<completion_protocol>\n"
    "You are a sub-agent: another agent delegated this task to you and is waiting for your report.\n"
    "- When the task is done, or you find you cannot do it, call task_complete once, as your last action: status "
    "completed or failed, a summary of what you found or did (or why it failed), the files you modified, the tests "
    "or checks you ran and how they ended, and any caveats.\n"
    "- Your turn ends with task_complete; do not end with a plain answer instead, and do not call it before the work "
    "is done.\n"
    "</completion_protocol>"
)

NAME_PATTERN = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,63}$")


class RegistryError(ValueError):
    """The registry file cannot be used; the message names the file and the key."""


class AgentEntry(BaseModel):
    """One `[agents.NAME]` table, as written in the file."""

    model_config = ConfigDict(extra="forbid")
    description: str = ""
    instructions: str = ""
    model: str = ""
    #: Seed 004's display prefix (emoji and label) for run's and chat's lines about this agent.
    prefix: StrictStr = ""
    tools: list[str] | None = None
    #: Strict, as [limits]: `max_iterations = "10"` is refused, not read as 10.
    max_iterations: StrictInt = Field(20, ge=1)
    max_depth: StrictInt = Field(1, ge=0)
    approvals: Any = None  # checked by runtime/approval_policy.py

    @field_validator("tools")
    @classmethod
    def _known_tools(cls, names: list[str] | None) -> list[str] | None:
        for name in names or []:
            if name in ORCHESTRATION_NAMES:
                raise ValueError(f"{name!r} is added by Chronicle when the agent may use it; remove it from the list")
            if ":" in name:
                continue  # the user's own tool by import path: loaded (and checked) when a loop is built, before recording
            if name not in BUILTIN_TOOLS and name not in OPT_IN_TOOLS:
                raise ValueError(f"unknown tool {name!r}; tools are {', '.join(BUILTIN_TOOLS)}, {opt_in_listed()}, "
                                 "or your own by import path (package.module:attribute)")
        return names


class RegistryFile(BaseModel):
    """chronicle.toml as the registry sees it; [limits] and [compaction] belong to runtime/cli/limits.py."""

    model_config = ConfigDict(extra="forbid")
    agents: dict[str, AgentEntry] = Field(default_factory=dict)
    limits: dict[str, Any] = Field(default_factory=dict)
    compaction: dict[str, Any] = Field(default_factory=dict)
    skills: dict[str, Any] = Field(default_factory=dict)
    routines: dict[str, Any] = Field(default_factory=dict)
    guardrails: dict[str, Any] = Field(default_factory=dict)
    middleware: dict[str, Any] = Field(default_factory=dict)  # checked by runtime/middleware.py
    hooks: dict[str, Any] = Field(default_factory=dict)  # checked by runtime/user_hooks.py
    effects: dict[str, Any] = Field(default_factory=dict)
    mcp: dict[str, Any] = Field(default_factory=dict)  # checked by runtime/tools/mcp_config.py
    privacy: dict[str, Any] = Field(default_factory=dict)  # checked by runtime/secret_scan.py
    channels: dict[str, Any] = Field(default_factory=dict)  # the server's; checked by runtime/server/channels.py
    tools: dict[str, Any] = Field(default_factory=dict)  # `env_passthrough`; checked by runtime/tools/tool_env.py
    approvals: Any = None  # checked by runtime/approval_policy.py
    agent: dict[str, Any] = Field(default_factory=dict)  # preamble, bootstrap; checked by runtime/spec_options.py
    models: dict[str, Any] = Field(default_factory=dict)  # auxiliary; checked by runtime/spec_options.py


@dataclass(frozen=True)
class AgentRegistry:
    """The main agent's definition and the sub-agents it may delegate to."""

    main: AgentSpec = field(default_factory=lambda: AgentSpec(name=MAIN, tools=DEFAULT_TOOLS))
    agents: tuple[AgentSpec, ...] = ()
    source: Path | None = None
    #: `[skills] dirs` from the file (runtime/skills.py); the workspace's skills/ is always looked at.
    skill_dirs: tuple[str, ...] = ()
    #: `[effects]` from the file (runtime/effects.py), recorded on the main spec.
    effects: tuple[tuple[str, Any], ...] = ()
    #: Agent(skills={"dirs": [...]}) was given in code: `skill_dirs` are the program's, not replaced by the file's.
    skill_dirs_in_code: bool = False
    #: `[mcp.NAME]` servers of the file (runtime/tools/mcp_config.py).
    mcp: dict[str, Any] = field(default_factory=dict)
    #: Agent(preamble=, bootstrap=, aux_model=) given in code; None: chronicle.toml's [agent] / [models] decide.
    preamble: bool | None = None
    behavioral_hints: bool | None = None
    bootstrap: bool | None = None
    aux_model: str | None = None
    #: Agent(max_iterations=) when the program set it; None when it kept the default (`main` holds the value either
    #: way): a continued session says it ignored only one the program gave (runtime/app/specs.py, ignored_in_code).
    max_iterations: int | None = None

    def main_spec(self, provider: str, model: str, workspace: str, max_iterations: int | None = None,
                  extra_tools: tuple[str, ...] = (), bootstrap: bool = True) -> AgentSpec:
        """The top-level spec as recorded: CLI values win over the file's; delegation tools if useful.

        `extra_tools` (`--tools module:attr`) are added to the main agent's own tools.

        With MCP servers configured, this is when they are asked for their tools (starting them
        if need be): the lists are recorded with the spec, for the main agent and each sub-agent."""
        agents = self.agents
        main = self.main
        if extra_tools:
            main = main.model_copy(update={"tools": (*main.tools, *(t for t in extra_tools if t not in main.tools))})
        if self.mcp:
            from chronicle.runtime.tools.mcp_config import McpConfigError
            from chronicle.runtime.tools.mcp_tools import tools_for_agent

            try:
                agents = tuple(a.model_copy(update={"mcp_tools": tools_for_agent(a.name, self.mcp, workspace)}) for a in agents)
                main = main.model_copy(update={"mcp_tools": tools_for_agent(main.name, self.mcp, workspace)})
            except McpConfigError as exc:
                raise RegistryError(str(exc)) from None
        spec = main.model_copy(
            update={
                "provider": provider, "model": model, "workspace": workspace, "depth": 0, "registry": agents,
                "max_iterations": max_iterations or self.main.max_iterations,
                "tool_edition": TOOL_EDITION,  # before the orchestration tools, which depend on it
            }
        )
        where = Path(workspace or ".")
        spec = with_skills(spec, discover_skills(where, self.skill_dirs))
        if bootstrap:  # [agent] bootstrap = false: none of the workspace's files for agents
            spec = with_project_files(with_memory(spec, where), where)
        spec = with_effects(spec, {"effects": dict(self.effects)})
        return with_orchestration_tools(spec)


    def names(self) -> list[str]:
        """Every agent a session may start as: main first, then the file's sub-agents."""
        return [MAIN, *(a.name for a in self.agents)]

    def starting_as(self, name: str) -> "AgentRegistry":
        """This registry with `name` as the top-level agent (`POST /sessions {"agent": NAME}`): its own
        instructions, tools and limits at depth 0, the other sub-agents still its to delegate to."""
        if name == MAIN:
            return self
        chosen = next((a for a in self.agents if a.name == name), None)
        if chosen is None:
            raise RegistryError(f"unknown agent {name!r} (agents: {', '.join(self.names())})")
        others = tuple(a for a in self.agents if a.name != name)
        return AgentRegistry(main=chosen, agents=others, source=self.source, skill_dirs=self.skill_dirs,
                             effects=self.effects, mcp=self.mcp, preamble=self.preamble, bootstrap=self.bootstrap,
                             aux_model=self.aux_model, skill_dirs_in_code=self.skill_dirs_in_code)


def targets(spec: AgentSpec) -> list[AgentSpec]:
    """Who this agent may delegate to: every sub-agent but itself (and never `main`)."""
    me = spec.name.casefold()
    return [a for a in spec.registry if a.name.casefold() not in (me, MAIN)]


def agents_directory(spec: AgentSpec) -> str:
    """Who the agent may hand tasks to, for its system prompt (seed 004's `<available_agents>`), so
    the model need not call list_agents first to know; empty when it may not delegate."""
    if not spec.may_delegate or not targets(spec):
        return ""
    lines = [f"- {a.name}: {a.description or '(no description)'} [tools: {', '.join(a.tools) or 'none'}]" for a in targets(spec)]
    board = ("\nTasks may already wait on your task board: `list_tasks` shows them, and a delegate task item naming one's "
             "task_id has its agent claim it.") if BOARD_TOOL in spec.tools else ""
    return ("<available_agents>\nAgents you may hand tasks to with `delegate` (tasks given together run at once):\n"
            + "\n".join(lines) + board + "\n</available_agents>")


def with_orchestration_tools(spec: AgentSpec) -> AgentSpec:
    """Sub-agents get task_complete; an agent above its depth limit with someone to delegate to
    gets list_agents and delegate, and from tool edition 3 list_tasks (so it can find the task ids
    delegate claims). Everything else is exactly the tools the file names. The edition is the
    spec's own: a sub-agent of a session recorded before list_tasks gets none, as its parent has none."""
    tools = [t for t in spec.tools if t not in ORCHESTRATION_NAMES]
    if spec.depth > 0:
        tools.append(COMPLETION_TOOL)
    if spec.may_delegate and targets(spec):
        tools.extend(DELEGATION_TOOLS)
        if spec.tool_edition >= LIST_TASKS_EDITION:
            tools.append(BOARD_TOOL)
    return spec.model_copy(update={"tools": tuple(tools)})


def completion_protocol(edition: int) -> str:
    """What a new sub-agent of a session of this tool edition is told about task_complete: nothing before
    COMPLETION_PROTOCOL_EDITION, so an older session's sub-agents are prompted as its release prompted them."""
    return COMPLETION_PROTOCOL if edition >= COMPLETION_PROTOCOL_EDITION else ""


def identity(definition: AgentSpec, instance: str, edition: int) -> str:
    """Seed 004's `<identity>`, a sub-agent's first section from COMPLETION_PROTOCOL_EDITION on: who it is (its instance
    name, the name its work is reported under) and what its agent is for."""
    if edition < COMPLETION_PROTOCOL_EDITION or not instance:
        return ""
    what = f": {definition.description.strip()}" if definition.description.strip() else ""
    return f"<identity>\nYou are {instance}, a {definition.name} sub-agent{what}\n</identity>"


def child_spec(parent: AgentSpec, definition: AgentSpec, instance: str = "") -> AgentSpec:
    """A child one level down: the definition's own tools and limits, never a deeper limit than its parent's.
    `instance`: its instance name (domain/instance_names.py), given by delegate when it spawns one."""
    depth = parent.depth + 1
    max_depth = min(definition.max_depth, parent.max_depth)
    spec = definition.model_copy(
        update={
            "depth": depth, "max_depth": max_depth, "provider": parent.provider,
            "model": definition.model or parent.model, "workspace": parent.workspace,
            "registry": parent.registry if depth < max_depth else (),
            # a sub-agent without a policy of its own decides as the agent that asked it
            "approvals": definition.approvals or parent.approvals,
            "project_files": for_subagent(parent), "aux_model": parent.aux_model, "tool_edition": parent.tool_edition,
            # seed 004's <identity> and <completion_protocol> (from their edition on) and <notes_protocol> (given the notes
            # tools), in the seed's order, are a sub-agent's only preamble
            "preamble": "\n\n".join(p for p in (identity(definition, instance, parent.tool_edition),
                                                 completion_protocol(parent.tool_edition), definition.preamble,
                                                 notes_protocol(definition.tools)) if p),
            "instance": instance,
        }
    )
    spec = with_orchestration_tools(with_skills(spec, parent.skills))
    directory = agents_directory(spec) if parent.tool_edition >= SUB_AGENT_DIRECTORY_EDITION else ""
    if directory:  # seed 004: whom it may delegate to, last, as the top-level agent is told
        spec = spec.model_copy(update={"preamble": "\n\n".join(p for p in (spec.preamble, directory) if p)})
    return spec


def load_registry(path: Path) -> AgentRegistry:
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise RegistryError(f"agents file not found: {path}; pass an existing file with --agents") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(f"cannot read agents file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path} is not valid TOML: {exc}") from None
    try:
        parsed = RegistryFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        message = "unknown key (allowed: description, instructions, model, prefix, tools, max_iterations, max_depth, approvals)" \
            if first["type"] == "extra_forbidden" and len(first["loc"]) == 3 else first["msg"]
        if first["type"] in EXPECTED and first["type"] != "extra_forbidden":  # a quoted number: name the type it needs
            expected = EXPECTED[first["type"]].format(**(first.get("ctx") or {}))
            message = f"expected {expected}, got {first.get('input')!r}"
        if first["type"] == "extra_forbidden" and len(first["loc"]) == 1:
            message = ("unknown top-level key; chronicle.toml holds [agents.NAME], [mcp.NAME], [limits], [compaction], [skills], "
                       "[routines.NAME], [guardrails.NAME], [middleware.NAME], [hooks.NAME], [channels.NAME], [tools], [effects], "
                       "[approvals], [agent], [models] and [privacy] tables")
        raise RegistryError(f"{path}: {where}: {message.removeprefix('Value error, ')}") from None
    from chronicle.runtime.approval_policy import ApprovalPolicyError, parse_policy

    try:
        shared = parse_policy(raw["approvals"], f"{path}: approvals", f"{path.name} [approvals]") if "approvals" in raw else None
    except ApprovalPolicyError as exc:
        raise RegistryError(str(exc)) from None
    main = AgentSpec(name=MAIN, tools=DEFAULT_TOOLS, approvals=shared)
    agents: list[AgentSpec] = []
    for name, entry in parsed.agents.items():
        if not NAME_PATTERN.match(name):
            raise RegistryError(f"{path}: agents.{name}: agent names start with a letter and use letters, digits, - and _")
        is_main = name == MAIN
        tools = tuple(entry.tools) if entry.tools is not None else (DEFAULT_TOOLS if is_main else READ_ONLY_TOOLS)
        own = shared
        try:
            if entry.approvals is not None:
                own = parse_policy(entry.approvals, f"{path}: agents.{name}.approvals", f"{path.name} [agents.{name}.approvals]")
        except ApprovalPolicyError as exc:
            raise RegistryError(str(exc)) from None
        spec = AgentSpec(
            name=name, description=entry.description, instructions=entry.instructions, model=entry.model,
            tools=tools, max_iterations=entry.max_iterations, max_depth=entry.max_depth, approvals=own, prefix=entry.prefix,
        )
        if is_main:
            main = spec
        else:
            agents.append(spec)
    try:
        from chronicle.runtime.tools.mcp_config import McpConfigError, parse_servers

        servers = parse_servers(parsed.mcp, path.resolve())
    except McpConfigError as exc:
        raise RegistryError(str(exc)) from None
    known = {MAIN, *parsed.agents}
    for server in servers.values():
        stranger = next((a for a in server.agents if a not in known), None)
        if stranger is not None:
            names = ", ".join(sorted(known))
            raise RegistryError(f"{path}: mcp.{server.name}.agents: no agent named {stranger!r} (agents: {names})")
    folded = [a.name.casefold() for a in agents]
    clash = next((a.name for a in agents if folded.count(a.name.casefold()) > 1), None)
    if clash:
        raise RegistryError(f"{path}: agents.{clash}: another agent has the same name in a different case")
    try:
        dirs = configured_dirs(raw, str(path))
        with_effects(main, raw, str(path))  # checked now: a bad [effects] table is a usage error before anything runs
    except (SkillError, EffectsError) as exc:
        raise RegistryError(str(exc)) from None
    return AgentRegistry(main=main, agents=tuple(agents), source=path, skill_dirs=tuple(dirs), mcp=servers,
                         effects=tuple(sorted((raw.get("effects") or {}).items())))


def with_workspace_tables(registry: AgentRegistry, workspace: Path) -> AgentRegistry:
    """Agents given in code with the workspace's `[skills] dirs` and `[effects]`, which the agents of its chronicle.toml
    get: a program's session recorded neither (its own skills/ only, no trimming) while `chronicle skills` listed those
    dirs and `run` in the same workspace recorded both. The file's [agents] tables stay the CLI's. What the Agent gave
    in code wins: its `effects` keys over the file's, its `skills` dirs instead of the file's."""
    path = workspace / "chronicle.toml"
    if not path.is_file():
        return registry
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise RegistryError(f"cannot read {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise RegistryError(f"{path} is not valid TOML: {exc}") from None
    try:
        dirs = configured_dirs(raw, str(path))
        with_effects(registry.main, raw, str(path))  # checked now, as load_registry checks it
    except (SkillError, EffectsError) as exc:
        raise RegistryError(str(exc)) from None
    effects = {**(raw.get("effects") or {}), **dict(registry.effects)}
    return replace(registry, skill_dirs=registry.skill_dirs if registry.skill_dirs_in_code else tuple(dirs),
                   effects=tuple(sorted(effects.items())))


def find_registry(explicit: Path | None, workspace: Path) -> AgentRegistry:
    """`--agents PATH` if given (it must exist); else `chronicle.toml` in the workspace if present."""
    if explicit is not None:
        return load_registry(explicit.expanduser().resolve())
    default = workspace / DEFAULT_FILE
    return load_registry(default) if default.is_file() else AgentRegistry()
