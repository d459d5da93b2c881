"""What an agent is: recorded on its Session so that resume, replay and audit know it exactly.

A sub-agent's spec is resolved when it is spawned (depth, limits, tools) and recorded whole on
its own Session; `registry` carries the sub-agent definitions a session may delegate to, so a
resumed session never needs the registry file it started from.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import BaseModel, ConfigDict, Field, model_serializer

from .approval_policy import ApprovalPolicy
from .project_file import ProjectFile, project_prompt
from .skill import SkillRecord, skills_prompt

#: The display prefix of an agent that set none (seed 004: a robot emoji).
DEFAULT_PREFIX = "🤖"


class AgentSpec(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    name: str = "main"
    description: str = ""
    instructions: str = ""
    provider: str = ""
    model: str = ""
    #: Extended-thinking budget chosen for the session (`chronicle model --thinking N`, Session.ModelChanged);
    #: None: the process's default (CHRONICLE_THINKING_TOKENS), 0: off. Left out of the dump when None.
    thinking_tokens: int | None = None
    tools: tuple[str, ...] = ()
    max_iterations: int = 20
    max_depth: int = 1
    depth: int = 0
    workspace: str = ""
    #: Sub-agent definitions known when this session started (see runtime/agents/registry.py).
    registry: tuple["AgentSpec", ...] = ()
    #: The limits the session started under (budget, rates, tool calls, tool timeout). A file the
    #: agent can write may only tighten them later; None for sessions recorded before they were.
    limits: dict[str, float | int | None] | None = None
    #: The default system prompt a new top-level session was given (workspace, date, tools), recorded
    #: so that every later request — and a replay — asks with exactly the same one. "" for sub-agents
    #: and sessions recorded before it existed.
    preamble: str = ""
    #: Skills found when the session started, recorded whole (runtime/skills.py); () for older sessions.
    skills: tuple[SkillRecord, ...] = ()
    #: MEMORY.md of the workspace as it read when the session started (runtime/memory.py); "" for none.
    memory: str = ""
    #: Secrets cut out of MEMORY.md before it was recorded, count per kind; left out of the dump when empty.
    memory_redacted: dict[str, int] = Field(default_factory=dict)
    #: Effects (runtime/effects.py): tool results of turns this many turns old are trimmed in the context; 0 = never.
    trim_tool_results_after_turns: int = 0
    trim_tool_results_to_chars: int = 200
    #: `[compaction]` keys given in code (`Agent(compaction=...)`), each winning over chronicle.toml's for this session
    #: whichever process runs it. None (left out of the dump) when none were given: the file decides, as before.
    compaction: dict[str, float | int | bool | None] | None = None
    #: MCP tools as the servers listed them when this session started (runtime/tools/mcp_tools.py):
    #: name, server, tool, description, input_schema, flags, config file. Left out of the dump
    #: when empty, so specs recorded before MCP look the same.
    mcp_tools: tuple[dict[str, Any], ...] = ()
    #: Guardrails given in code (`Agent(guardrails=...)`, runtime/guardrails.py): name, check (an
    #: import path), on, fail; any process running the session loads them. chronicle.toml's
    #: [guardrails] are read from the workspace each time instead. Left out of the dump when empty.
    guardrails: tuple[dict[str, Any], ...] = ()
    #: Middleware given in code (`Agent(middleware=...)`, runtime/middleware.py): name, use (an import
    #: path), options; chronicle.toml's [middleware] are read from the workspace each time instead.
    #: Left out of the dump when empty.
    middleware: tuple[dict[str, Any], ...] = ()
    #: Hooks given in code (`Agent(hooks=...)`, runtime/user_hooks.py): name, use (the import path of a
    #: Hook class), options; chronicle.toml's [hooks] are read from the workspace each time instead.
    #: Left out of the dump when empty.
    hooks: tuple[dict[str, Any], ...] = ()
    #: Which calls wait for a person and what happens to them unasked (domain/approval_policy.py), from
    #: `[approvals]`, `[agents.NAME.approvals]` or `Agent(approvals=...)`. None for sessions recorded before
    #: it existed (and for agents that set none): the tools' flags decide and a person is asked, as then.
    #: Left out of the dump when None, so older specs look the same.
    approvals: ApprovalPolicy | None = None
    #: AGENTS.md and TOOLS.md of the workspace as they read when the session started, secrets cut
    #: (runtime/project_files.py); a sub-agent gets its parent's. Left out of the dump when empty.
    project_files: tuple[ProjectFile, ...] = ()
    #: The model of auxiliary calls (titles, compaction summaries, the heartbeat): `[models] auxiliary`,
    #: CHRONICLE_AUX_MODEL or Agent(aux_model=...) when the session started; "" = the main model.
    #: Left out of the dump when empty.
    aux_model: str = ""
    #: Which schemas of Chronicle's own tools the session is offered (runtime/tools/editions.py): the edition
    #: current when it started, so an upgrade that changes a built-in tool's schema changes neither what the
    #: session is asked with nor its replay. 1 for sessions recorded before editions; left out of the dump then.
    tool_edition: int = 1
    #: The tool names each of the user's import paths in `tools` held when the session started (`{"shop:TOOLS":
    #: ("lookup", "refund")}`), so a continued session can tell which of them its path no longer holds
    #: (runtime/app/vanished_tools.py). Empty for sessions recorded before it (and those with no such path);
    #: left out of the dump then, so older specs look the same.
    import_tools: dict[str, tuple[str, ...]] = Field(default_factory=dict)
    #: Seed 004's display prefix (an emoji and label, e.g. "🔎 research") that run, chat and the live events show for
    #: this agent; "" shows DEFAULT_PREFIX. Display only: never in what the model is sent. Left out of the dump when empty.
    prefix: str = ""
    #: Seed 004's instance name of a sub-agent (`researcher-parsing-2`, domain/instance_names.py), given when it is
    #: spawned; "" for a top-level session and for sub-agents recorded before it (their name is their agent's).
    #: Display only: never in what the model is sent. Left out of the dump when empty.
    instance: str = ""

    @model_serializer(mode="wrap")
    def _without_empty_mcp(self, handler: Any) -> dict[str, Any]:
        data = handler(self)
        if isinstance(data, dict):
            for key in ("mcp_tools", "guardrails", "middleware", "hooks", "approvals", "project_files", "aux_model", "memory_redacted",
                        "import_tools", "prefix", "instance"):
                if not data.get(key):
                    data.pop(key, None)
            if data.get("compaction") is None:
                data.pop("compaction", None)
            if data.get("thinking_tokens") is None:
                data.pop("thinking_tokens", None)
            if data.get("tool_edition") == 1:
                data.pop("tool_edition", None)
        return cast("dict[str, Any]", data)

    @property
    def approval_policy(self) -> ApprovalPolicy:
        """The policy in force: the recorded one, or today's default for a session that recorded none."""
        return self.approvals or ApprovalPolicy()

    @property
    def shown_name(self) -> str:
        """What people read for this agent: its instance name, else its agent's name."""
        return self.instance or self.name

    @property
    def may_delegate(self) -> bool:
        """Delegation is allowed above the depth limit only: a child sits at depth + 1."""
        return self.depth < self.max_depth

    def auxiliary_model(self, main: str) -> str:
        """The model an auxiliary call asks: the recorded one, else `main` (the model the session's turns ask)."""
        return self.aux_model or main

    @property
    def system_prompt(self) -> str:
        """What the model is told as system: the preamble (a new top-level session's default prompt), the
        agent's instructions, the project files (AGENTS.md, TOOLS.md) and MEMORY.md as recorded, then the
        recorded skills. Sessions recorded before the preamble, project files, memory or skills existed get
        exactly their instructions, so their request fingerprints stay the same."""
        memory = f"<memory>\n{self.memory.strip()}\n</memory>" if self.memory else ""
        parts = (self.preamble, self.instructions, project_prompt(self.project_files), memory, skills_prompt(self.skills))
        return "\n\n".join(part for part in parts if part)


