"""`Agent`: an agent defined in code, turned into the AgentSpec a session records.

An Agent holds live objects (tool functions, sub-agents); a session records names only —
built-in tools by name, the user's tools by import path — so that `chronicle resume` and a
worker in another process can rebuild the same toolbox. Sub-agents become the spec's registry,
exactly as `[agents.NAME]` tables in chronicle.toml do.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Any

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.approval_policy import ApprovalPolicy
from chronicle.runtime.agents.registry import MAIN, NAME_PATTERN, ORCHESTRATION_NAMES, AgentRegistry
from chronicle.runtime.app.errors import DefinitionError
from chronicle.runtime.import_paths import Clash, LiveObjects, add_by_value, collecting, only_this_process
from chronicle.runtime.tools import BUILTIN_TOOLS, DEFAULT_TOOLS, READ_ONLY_TOOLS
from chronicle.runtime.tools.base import Tool
from chronicle.runtime.tools.imports import is_import_path, remember
from chronicle.runtime.tools.opt_in import OPT_IN_TOOLS, opt_in_listed


class _Unset(int):
    """Agent's max_iterations when the program set none: 20 like any other, but known to be the default, so that a
    continued session does not say it ignored a number the program never gave (run(max_iterations=) may have
    recorded another when the session started)."""


DEFAULT_MAX_ITERATIONS = _Unset(20)


@dataclass
class Agent:
    """An agent: its instructions, tools (your @tool functions and built-ins by name), provider and sub-agents.

    `tools=None` gives the built-in defaults (every built-in for a top-level agent, the read-only
    ones for a sub-agent), as chronicle.toml does. `provider` is "anthropic",
    "openai-compatible" or "scripted:PATH" (another name is refused here; a script is read when a run starts);
    None means anthropic when ANTHROPIC_API_KEY is set.
    """

    name: str = MAIN
    instructions: str = ""
    tools: Sequence[Any] | None = None
    provider: str | None = None
    model: str | None = None
    agents: Sequence[Agent] = ()
    description: str = ""
    max_iterations: int = DEFAULT_MAX_ITERATIONS
    max_depth: int = 1
    #: MCP servers whose tools this agent gets: McpServer objects, or names of [mcp.NAME] tables in
    #: the workspace's chronicle.toml. Their tool lists are recorded when a session starts.
    mcp_servers: Sequence[Any] = ()
    #: Checks on the input, tool results and final answer that pass, change or reject them: Guardrail
    #: objects, or plain functions `check(text, where)` (named after the function, on all three places,
    #: fail closed). Recorded on the session by import path, so workers and `resume` apply them too.
    guardrails: Sequence[Any] = ()
    #: Wrappers around each run of a turn (runtime/middleware.py), the first outermost: async functions
    #: `around(run, call_next)`, dataclass instances with such a __call__ (the built-in Timeout(seconds=...),
    #: Logger()), or Middleware objects. Recorded on the session by import path, as guardrails are.
    middleware: Sequence[Any] = ()
    #: Your code at each model call and tool call of a turn (runtime/user_hooks.py): chronicle.Hook subclasses
    #: or their instances (a dataclass's fields are its options), run after the built-in guards in this order.
    #: Recorded on the session by import path, as middleware is.
    hooks: Sequence[Any] = ()
    #: Which tool calls wait for a person and what becomes of them unasked, as chronicle.toml's [approvals]:
    #: a mapping {"policy": "ask" | "deny" | "allow", "require": [tool, ...], "allow": [tool, ...]}. Recorded on
    #: the session, so `resume` and workers decide as this process would. None: chronicle.toml's [approvals], if any.
    approvals: Mapping[str, Any] | None = None
    #: The same tool with the same input this many times in a row stops the turn (0: never; default 3, or
    #: chronicle.toml's [limits] doom_loop). Recorded on the session with its limits; top-level agent only.
    doom_loop: int | None = None
    #: The default system prompt (workspace, date, tools) before the instructions; None: `[agent] preamble` of
    #: chronicle.toml decides (default on). A top-level agent's setting; recorded as the text it gave.
    preamble: bool | None = None
    #: The default prompt's behavioural hints (seed 004's <behavioral_constraints>: read before answering, adapt
    #: to a failed call, end with a summary); None: `[agent] behavioral_hints` of chronicle.toml, else True.
    behavioral_hints: bool | None = None
    #: Seed 004's display prefix: an emoji and label run, chat and the live `agent_start` event show for this agent
    #: (default a robot). Display only: the model is never sent it.
    prefix: str | None = None
    #: The workspace's AGENTS.md, TOOLS.md and MEMORY.md read into a new session's system prompt; None:
    #: `[agent] bootstrap` decides (default on). Sub-agents get their parent's AGENTS.md and TOOLS.md.
    bootstrap: bool | None = None
    #: The model of titles, compaction summaries and the heartbeat (e.g. "claude-haiku-4-5"); None:
    #: CHRONICLE_AUX_MODEL, then `[models] auxiliary`, then the main model. Recorded on the session.
    aux_model: str | None = None
    #: The guards' limits, as chronicle.toml's [limits] gives them (seed 001's cost guard): a mapping of
    #: budget_usd (this session's tree, USD), daily_budget_usd (all sessions, UTC day), max_calls_per_hour,
    #: max_tool_calls (per turn), tool_timeout_s and doom_loop. Recorded on the session, so `resume` and workers
    #: stop where this process would; each wins over [limits], a run's flags over it. Top-level agent only.
    limits: Mapping[str, Any] | None = None
    #: When and how the conversation is compacted, as chronicle.toml's [compaction]: a mapping of threshold and
    #: critical (ratios of the context window, 0..1), keep_recent (turns kept whole), context_window (tokens) and
    #: auto (a bool). Recorded on the session, so `resume` and workers compact as this process would; each key given
    #: wins over [compaction] of the workspace's file, which still gives the others. Top-level agent only.
    compaction: Mapping[str, Any] | None = None
    #: What the model reads of old tool results, as [effects]: trim_tool_results_after_turns (0: never) and
    #: trim_tool_results_to_chars. Recorded on the session when it starts; each key given wins over [effects].
    #: Top-level agent only.
    effects: Mapping[str, Any] | None = None
    #: Where skills are found besides the workspace's skills/, as [skills]: {"dirs": ["../shared-skills", ...]}
    #: (relative to the workspace). Given, it replaces [skills] dirs of the file; the skills found are recorded on
    #: the session when it starts. Top-level agent only.
    skills: Mapping[str, Any] | None = None
    _entries: tuple[str, ...] = field(default=(), init=False, repr=False)
    _guardrails: tuple[dict[str, Any], ...] = field(default=(), init=False, repr=False)
    _middleware: tuple[dict[str, Any], ...] = field(default=(), init=False, repr=False)
    _hooks: tuple[dict[str, Any], ...] = field(default=(), init=False, repr=False)
    _approvals: ApprovalPolicy | None = field(default=None, init=False, repr=False)
    _limits: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _compaction: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _effects: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _skill_dirs: tuple[str, ...] | None = field(default=None, init=False, repr=False)
    _live: LiveObjects = field(default_factory=LiveObjects, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        """Every field checked now, so a bad one is refused where the program wrote it, not at its first run: a
        DefinitionError (ChronicleError code 2, and the ValueError or TypeError these raised before)."""
        try:
            self._check()
        except (ValueError, TypeError) as exc:
            raise DefinitionError.of(exc) from None

    def _check(self) -> None:
        if not isinstance(self.name, str) or not NAME_PATTERN.match(self.name):
            raise ValueError(f"agent name {self.name!r}: names start with a letter and use letters, digits, - and _")
        for text in ("instructions", "description"):  # else the session's record refused it at the first run
            if not isinstance(getattr(self, text), str):
                raise TypeError(f"agent {self.name}: {text} takes text, got {type(getattr(self, text)).__name__}")
        for named, example in (("provider", "anthropic"), ("model", "claude-sonnet-4-5")):
            value = getattr(self, named)
            if value is not None and (not isinstance(value, str) or (value and not value.strip())):
                raise TypeError(f"agent {self.name}: {named} takes a name, like {named}={example!r}; got {value!r} "
                                "(leave it out for the default)")
        if self.provider:  # its name only: a script is read when a run makes the provider
            from chronicle.runtime.providers import check_provider_name

            try:
                check_provider_name(self.provider)
            except ValueError as exc:
                raise ValueError(f"agent {self.name}: provider: {exc}") from None
        for whole in ("max_iterations", "max_depth"):  # strict, as chronicle.toml: "10" is no number
            value = getattr(self, whole)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ValueError(f"agent {self.name}: {whole} takes a whole number, got {value!r}")
        if self.max_iterations < 1:
            raise ValueError(f"agent {self.name}: max_iterations must be at least 1")
        if self.max_depth < 0:
            raise ValueError(f"agent {self.name}: max_depth cannot be negative")
        if self.doom_loop is not None and (isinstance(self.doom_loop, bool) or not isinstance(self.doom_loop, int) or self.doom_loop < 0):
            raise ValueError(f"agent {self.name}: doom_loop takes a whole number ≥ 0 (0 turns the guard off), got {self.doom_loop!r}")
        self._limits = self._checked_limits()
        self._compaction, self._effects, self._skill_dirs = self._checked_tables()
        if self.approvals is not None:
            from chronicle.runtime.approval_policy import parse_policy

            self._approvals = parse_policy(self.approvals, f"agent {self.name}: approvals", f"Agent({self.name}, approvals=...)")
        if self.aux_model is not None and (not isinstance(self.aux_model, str) or not self.aux_model.strip()):
            raise ValueError(f"agent {self.name}: aux_model takes a model name, like aux_model=\"claude-haiku-4-5\"; "
                             "leave it out for the main model")
        if self.prefix is not None and not isinstance(self.prefix, str):
            raise ValueError(f"agent {self.name}: prefix takes text, like prefix=\"🔎 research\"")
        for switch in ("preamble", "bootstrap", "behavioral_hints"):
            if getattr(self, switch) not in (None, True, False):
                raise ValueError(f"agent {self.name}: {switch} takes True or False")
        for field_name in ("tools", "agents", "mcp_servers", "guardrails", "middleware", "hooks"):
            given = getattr(self, field_name)
            if isinstance(given, (str, bytes)) or (given is not None and not isinstance(given, Sequence)):
                # a lone "read_file" is a sequence of letters, each then an unknown tool
                shown = repr(given) if len(repr(given)) <= 40 else "..."
                raise ValueError(f"agent {self.name}: {field_name} takes a list, like {field_name}=[{shown}]")
        self.descendants()  # a sub-agent that is no Agent, or two of one name: refused here, not at the first run
        for child in self.agents:
            if child.provider and child.provider != self.provider:  # the registry never read it: silently another's
                raise ValueError(f"agent {self.name}: sub-agent {child.name} has provider={child.provider!r}; sub-agents run on "
                                 "their parent's provider (give a sub-agent model= only, or leave provider out)")
        try:
            with collecting() as self._live:
                self._records()
                if self.mcp_servers:  # recorded by name only: a run of this Agent uses these very settings
                    from chronicle.runtime.tools.mcp_config import McpServerConfig

                    for server in self.mcp_servers:
                        if isinstance(server, McpServerConfig):
                            add_by_value("mcp_server", server.name, server)
            for child in self.agents:
                if isinstance(child, Agent):  # anything else is refused by descendants()
                    self._live.merge(child._live)
        except Clash as exc:
            raise ValueError(f"agent {self.name}: {exc}") from None

    def _records(self) -> None:
        """Tools, guardrails, middleware and hooks as the spec records them: by name or import path. The objects
        given are gathered on the way (`_live`): a run of this Agent uses them, not others of the same path."""
        self._entries = tuple(tool_entry(t, self.name) for t in self.tools) if self.tools is not None else ()
        self._guardrails = tuple(guardrail_record(g, self.name) for g in self.guardrails)
        names = [g["name"] for g in self._guardrails]
        if len(set(names)) != len(names):
            raise ValueError(f"agent {self.name}: two guardrails have the same name; give each its own")
        from chronicle.runtime.middleware import middleware_record

        self._middleware = tuple(middleware_record(m, self.name) for m in self.middleware)
        names = [m["name"] for m in self._middleware]
        if len(set(names)) != len(names):
            raise ValueError(f"agent {self.name}: two middleware have the same name; wrap one in Middleware(name, ...)")
        from chronicle.runtime.user_hooks import hook_record

        self._hooks = tuple(hook_record(h, self.name) for h in self.hooks)
        names = [h["name"] for h in self._hooks]
        if len(set(names)) != len(names):
            raise ValueError(f"agent {self.name}: two hooks have the same name; give one a `name` class attribute")

    def _checked_limits(self) -> dict[str, Any]:
        """`limits` and `doom_loop` as the spec records them (only those given), checked as [limits] is checked."""
        given: dict[str, Any] = {}
        if self.limits is not None:
            if not isinstance(self.limits, Mapping):
                raise TypeError(f"agent {self.name}: limits takes a mapping, like limits={{\"budget_usd\": 2.0}}, "
                                f"got {type(self.limits).__name__}")
            odd = next((k for k in self.limits if not isinstance(k, str)), None)
            if odd is not None:
                raise TypeError(f"agent {self.name}: limits: keys are the names of [limits]' settings, like 'budget_usd'; got {odd!r}")
            from pydantic import ValidationError

            from chronicle.runtime.settings import LimitValues
            from chronicle.runtime.validation import explain

            try:
                checked = LimitValues.model_validate(dict(self.limits))
            except ValidationError as exc:
                raise ValueError(explain(exc, f"agent {self.name}: limits ", allowed=sorted(LimitValues.model_fields))) from None
            given = {k: v for k, v in checked.model_dump().items() if k in self.limits and v is not None}
            if "doom_loop" in given and self.doom_loop is not None and given["doom_loop"] != self.doom_loop:
                raise ValueError(f"agent {self.name}: doom_loop is given twice (doom_loop={self.doom_loop} and "
                                 f"limits['doom_loop']={given['doom_loop']}); give it once")
        if self.doom_loop is not None:
            given["doom_loop"] = self.doom_loop
        return given

    def _checked_tables(self) -> tuple[dict[str, Any], dict[str, Any], tuple[str, ...] | None]:
        """`compaction`, `effects` and `skills` as chronicle.toml's tables are checked (strict: `auto="yes"` or
        `trim_tool_results_after_turns=True` is refused), each keeping only the keys given."""
        from pydantic import ValidationError

        from chronicle.runtime.effects import with_effects
        from chronicle.runtime.settings import CompactionValues
        from chronicle.runtime.skills import configured_dirs
        from chronicle.runtime.validation import explain

        tables: dict[str, dict[str, Any]] = {}
        for name, example in (("compaction", '{"threshold": 0.6}'), ("effects", '{"trim_tool_results_after_turns": 3}'),
                              ("skills", '{"dirs": ["../skills"]}')):
            given = getattr(self, name)
            if given is None:
                continue
            if not isinstance(given, Mapping):
                raise TypeError(f"agent {self.name}: {name} takes a mapping, like {name}={example}, got {type(given).__name__}")
            odd = next((k for k in given if not isinstance(k, str)), None)
            if odd is not None:
                raise TypeError(f"agent {self.name}: {name}: keys are the names of [{name}]'s settings; got {odd!r}")
            tables[name] = dict(given)
        compaction: dict[str, Any] = {}
        if "compaction" in tables:
            try:
                checked = CompactionValues.model_validate(tables["compaction"])
            except ValidationError as exc:
                raise ValueError(explain(exc, f"agent {self.name}: compaction ", allowed=sorted(CompactionValues.model_fields))) from None
            compaction = {k: v for k, v in checked.model_dump().items() if k in tables["compaction"]}
        effects: dict[str, Any] = {}
        if "effects" in tables:
            from chronicle.domain.agent_spec import AgentSpec

            checked_spec = with_effects(AgentSpec(), {"effects": tables["effects"]}, f"agent {self.name}: effects")
            effects = {k: getattr(checked_spec, k) for k in tables["effects"]}
        dirs: tuple[str, ...] | None = None
        if "skills" in tables:
            listed = tables["skills"].get("dirs", [])
            if isinstance(listed, tuple) or (isinstance(listed, list) and all(isinstance(d, PurePath) for d in listed)):
                listed = list(listed)
            if isinstance(listed, list):
                listed = [str(d) if isinstance(d, PurePath) else d for d in listed]
            dirs = tuple(configured_dirs({"skills": {**tables["skills"], "dirs": listed}}, f"agent {self.name}: skills"))
        return compaction, effects, dirs

    def tool_names(self, top_level: bool) -> tuple[str, ...]:
        """What the spec records: built-in names and import paths."""
        if self.tools is None:
            return DEFAULT_TOOLS if top_level else READ_ONLY_TOOLS
        return self._entries

    def definition(self, top_level: bool) -> AgentSpec:
        return AgentSpec(
            name=self.name, description=self.description, instructions=self.instructions, model=self.model or "",
            tools=self.tool_names(top_level), max_iterations=self.max_iterations, max_depth=self.max_depth,
            guardrails=self._guardrails, middleware=self._middleware, hooks=self._hooks, approvals=self._approvals,
            limits=dict(self._limits) if top_level and self._limits else None,
            compaction=dict(self._compaction) if top_level and self._compaction else None, prefix=self.prefix or "",
        )

    def only_here(self) -> list[str]:
        """The code of this agent and its sub-agents that only this process can load: defined in a script
        run directly (`__main__`), or inside a function (`<locals>`, a factory's closure). A worker or `resume`
        elsewhere could never run a session that needs it."""
        paths = []
        for agent in [self, *self.descendants()]:
            paths += [t for t in agent._entries if ":" in t]
            paths += [str(g.get("check")) for g in agent._guardrails]
            paths += [str(m.get("use")) for m in agent._middleware]
            paths += [str(h.get("use")) for h in agent._hooks]
        return [p for p in dict.fromkeys(paths) if only_this_process(p)]

    def descendants(self) -> list[Agent]:
        """Every sub-agent below this one, each once (the registry is flat, as in chronicle.toml); DefinitionError for
        an item that is no Agent or two of one name, the top-level agent's too (`submit` asks before `registry` does)."""
        found: dict[str, Agent] = {}

        def visit(agent: Agent) -> None:
            for child in agent.agents:
                if not isinstance(child, Agent):
                    raise DefinitionError(f"agent {agent.name}: agents= takes Agent objects, not {type(child).__name__}")
                if child.name.casefold() == self.name.casefold() and child is not self:  # was left out without a word
                    raise DefinitionError(f"agent {agent.name}: a sub-agent is named {child.name!r}, as the top-level agent is; "
                                          "give it its own name")
                known = found.get(child.name.casefold())
                if known is not None and known is not child:
                    raise DefinitionError(f"two sub-agents are named {child.name!r}; give each its own name")
                if known is None and child.name.casefold() != self.name.casefold():
                    found[child.name.casefold()] = child
                    visit(child)

        visit(self)
        return list(found.values())

    def registry(self, workspace: str | Path | None = None) -> AgentRegistry:
        """This agent as the main one and its sub-agents, as chronicle.toml's [agents] tables would give them,
        with the MCP servers they name (`mcp_servers`; names are looked up in the workspace's chronicle.toml)."""
        try:
            descendants = self.descendants()
            for agent in descendants:
                if agent.doom_loop is not None:
                    raise ValueError(f"agent {agent.name}: doom_loop is set on the top-level agent; a sub-agent runs under its guards")
                if agent._limits:
                    raise ValueError(f"agent {agent.name}: limits are set on the top-level agent; a sub-agent runs under its "
                                     "guards (the budget covers the whole tree)")
                for table in ("compaction", "effects", "skills"):
                    if getattr(agent, table) is not None:
                        raise ValueError(f"agent {agent.name}: {table} is set on the top-level agent; a sub-agent's session "
                                         "goes by its parent's")
            mcp = mcp_servers_of([self, *descendants], workspace)
        except (ValueError, TypeError) as exc:  # a sub-agent or MCP server that cannot work: refused before anything is recorded
            raise DefinitionError.of(exc) from None
        return AgentRegistry(main=self.definition(True), agents=tuple(a.definition(False) for a in descendants),
                             mcp=mcp, preamble=self.preamble, behavioral_hints=self.behavioral_hints,
                             bootstrap=self.bootstrap, aux_model=self.aux_model,
                             effects=tuple(sorted(self._effects.items())), skill_dirs=self._skill_dirs or (),
                             skill_dirs_in_code=self._skill_dirs is not None,
                             max_iterations=None if isinstance(self.max_iterations, _Unset) else self.max_iterations)


def mcp_servers_of(agents: Sequence[Agent], workspace: str | Path | None) -> dict[str, Any]:
    """Each server named by any of the agents, given to exactly the agents that name it."""
    from chronicle.runtime.agents.registry import find_registry

    workspace = Path(workspace or Path.cwd()).expanduser().resolve()
    from chronicle.runtime.tools.mcp_config import McpServerConfig, code_server

    servers: dict[str, McpServerConfig] = {}
    users: dict[str, list[str]] = {}
    for agent in agents:
        for item in agent.mcp_servers:
            if isinstance(item, str):
                configured = find_registry(None, workspace).mcp
                if item not in configured:
                    raise ValueError(f"agent {agent.name}: no [mcp.{item}] in {workspace / 'chronicle.toml'}")
                config = configured[item]
            elif isinstance(item, McpServerConfig):
                config = code_server(item)
            else:
                raise TypeError(f"agent {agent.name}: mcp_servers= takes McpServer objects or [mcp.NAME] names, not {type(item).__name__}")
            servers[config.name] = config
            users.setdefault(config.name, []).append(agent.name)
    return {name: config.model_copy(update={"agents": users[name]}) for name, config in servers.items()}


def tool_entry(item: Any, agent: str) -> str:
    """A tools= item as the spec records it; anything else is a TypeError naming it."""
    if isinstance(item, str):
        if item in ORCHESTRATION_NAMES:
            raise ValueError(f"agent {agent}: {item!r} is added by Chronicle when the agent may use it; remove it from tools")
        if is_import_path(item):
            return item  # loaded when a session is set up (the workspace may be where it lives), before anything is recorded
        if item not in BUILTIN_TOOLS and item not in OPT_IN_TOOLS:
            raise ValueError(f"agent {agent}: unknown tool {item!r}; built-in tools are {', '.join(BUILTIN_TOOLS)}, "
                             f"{opt_in_listed()}, your own are @tool functions or import paths (package.module:attribute)")
        return item
    if isinstance(item, Tool):
        return remember(item)
    if inspect.isclass(item) and issubclass(item, Tool):
        return remember(item(), f"{item.__module__}:{item.__qualname__}")
    if inspect.isclass(item):
        what = f"the class {item.__name__}, which is not a subclass of Tool"
    else:
        what = f"{getattr(item, '__name__', 'a function')}, a function not decorated with @tool" if callable(item) else type(item).__name__
    raise TypeError(f"agent {agent}: tools= takes @tool functions, Tool classes and built-in names; got {what}")


def guardrail_record(item: Any, agent: str) -> dict[str, Any]:
    """A guardrails= item as the spec records it (name, import path, places, fail mode)."""
    from chronicle.runtime.guardrails import Guardrail

    if isinstance(item, Guardrail):
        return item.record()
    if callable(item):
        return Guardrail(getattr(item, "__name__", type(item).__name__), item).record()
    raise TypeError(f"agent {agent}: guardrails= takes Guardrail objects or check functions, not {type(item).__name__}")
