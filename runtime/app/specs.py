"""The agent spec a new session records: one builder for `run`, `chat`, `submit`, `demo` and the API.

Before this lived here, `chat` built its own spec (ignoring `[agents]` in chronicle.toml and the
file's max_iterations) and `submit` a third way; a session's behaviour then depended on which
command started it. Now every new top-level session is specified by `new_spec` and checked by
building its loop once before anything is recorded.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timezone
from pathlib import Path

from chronicle.domain.agent_spec import AgentSpec

from ..agents.registry import AgentRegistry, RegistryError, agents_directory, child_spec, find_registry, with_workspace_tables
from ..approval_policy import ApprovalPolicyError, check_tool_names, workspace_policy
from ..environment import EnvironmentSettingError
from ..providers import default_model, default_provider_name
from ..settings import SettingsError
from ..skills import SkillError
from ..spec_options import spec_options
from ..tools.editions import TOOL_EDITION
from ..tools.imports import ToolLoadError
from ..tools.notes import notes_protocol
from ..toolsets import agent_toolbox, with_tool_names
from .errors import AppError
from .model_change import check_model_name


def normalise_provider(name: str | None) -> str | None:
    """Record `scripted:` paths absolute, so a resume from another directory finds the script. An empty one is left
    empty (resolved, it named the current directory): the provider's own check says a file is needed."""
    if name and name.startswith("scripted:") and name[len("scripted:"):].strip():
        return "scripted:" + str(Path(name[len("scripted:"):]).expanduser().resolve())
    return name


def resolve_workspace(workspace: Path | str | None) -> Path:
    path = Path(workspace or Path.cwd()).expanduser().resolve()
    if not path.is_dir():
        raise AppError(f"workspace {path} is not a directory; pass an existing one with --workspace", 2)
    try:
        str(path).encode("utf-8")
    except UnicodeEncodeError:  # a byte that is not UTF-8 in a name (a latin-1 directory): Python holds it as a surrogate
        shown = str(bytes(path))[2:-1]
        raise AppError(f"workspace {shown} is not a UTF-8 path, and a session records its workspace as UTF-8 text (the tools "
                       "and the model see it so too); rename the directory to a UTF-8 name (`convmv -f latin1 -t utf8`), "
                       "or work from one that has one", 2) from None
    return path


def session_workspace(spec: AgentSpec | None) -> Path | None:
    """A continued session works where it was started, unless --workspace says otherwise."""
    if spec is not None and spec.workspace and Path(spec.workspace).is_dir():
        return Path(spec.workspace)
    return None


#: How the default system prompt begins: a recorded preamble that starts so was given it (`[agent] preamble` on).
PREAMBLE_OPENING = "You are an agent that works in a workspace through tools, and every step you take is recorded.\n"


#: Seed 004's heuristic behavioural hints: how to work, not what is true of this workspace. `[agent]
#: behavioral_hints = false` (or `Agent(behavioral_hints=False)`) leaves them out and keeps the facts above them.
BEHAVIORAL_HINTS = (
    "<behavioral_constraints>\n"
    "- Look before you answer: read files rather than guess, and read a file before you edit it.\n"
    "- A tool may fail or be denied; read its error result and adapt instead of repeating the same call.\n"
    "- When the task is done, answer with a short summary of what you did and what you found.\n"
    "</behavioral_constraints>"
)


def default_preamble(workspace: Path, tools: tuple[str, ...], today: date, hints: bool = True) -> str:
    """The main agent's default system prompt: the facts of where it works, then (`hints`) how to work; the agent's
    `instructions` extend it."""
    listed = ", ".join(tools) if tools else "none"
    facts = (
        PREAMBLE_OPENING +
        f"- Workspace: {workspace}. Paths you give tools are relative to it (write `src/app.py`, not an absolute path); "
        "nothing outside it can be read or changed.\n"
        f"- Today's date: {today.isoformat()}.\n"
        f"- Your tools: {listed}."
    )
    return f"{facts}\n\n{BEHAVIORAL_HINTS}" if hints else facts


def new_spec(workspace: Path, provider: str | None = None, model: str | None = None, max_iterations: int | None = None,
             agents: Path | None = None, today: date | None = None, registry: AgentRegistry | None = None,
             extra_tools: tuple[str, ...] = ()) -> AgentSpec:
    """The top-level spec a new session records: flags first, then `[agents.main]` of the registry file
    (`agents`, else chronicle.toml in the workspace) or of `registry` (an Agent of the public API), then
    the defaults; with the default system prompt, the workspace's AGENTS.md, TOOLS.md and MEMORY.md and the
    auxiliary model, as `[agent]` and `[models]` (runtime/spec_options.py) or `registry` say.
    `extra_tools`: `--tools module:attr` entries."""
    provider_name = normalise_provider(provider) or default_provider_name() or ""
    if model and not model.strip():  # recorded as the session's model, every call then refused
        raise AppError(f"the model name is blank ({model!r}); name one, e.g. --model claude-sonnet-5-5, or leave it out "
                       "for the provider's default", 2)
    try:
        if registry is not None:  # an Agent in code: the workspace's [skills] dirs and [effects], as the file's agents get
            registry = with_workspace_tables(registry, workspace)
        if registry is not None and registry.main.approvals is None:  # an Agent in code without a policy: the workspace's
            registry = replace(registry, main=registry.main.model_copy(update={"approvals": workspace_policy(workspace)}))
        registry = registry or find_registry(agents, workspace)
        options = spec_options(workspace, registry.source, registry.preamble, registry.bootstrap, registry.aux_model,
                               behavioral_hints=registry.behavioral_hints)
        chosen = ((model or "").strip() or registry.main.model
                  or ("scripted" if provider_name.startswith("scripted:") else default_model(provider_name)))
        if chosen:  # as a change of model is checked (model_change.py): "m\x01" or "<img src=x>" was recorded
            check_model_name(chosen)
        spec = registry.main_spec(  # starts the MCP servers it names, to record their tools
            provider=provider_name, workspace=str(workspace), max_iterations=max_iterations, extra_tools=extra_tools,
            model=chosen, bootstrap=options.bootstrap,
        )
        check_policies(spec, workspace)
        spec = with_tool_names(spec, workspace)
    except (RegistryError, ApprovalPolicyError, SettingsError, SkillError, EnvironmentSettingError, ToolLoadError) as exc:
        raise AppError(str(exc), 2) from None
    day = today or datetime.now(timezone.utc).date()
    # Recorded, not computed when asking: a session started before the directory existed keeps its prompt.
    # `[agent] preamble = false` leaves the default prompt out; whom the agent may delegate to is still said, and
    # what its shared notes are for (seed 004's <notes_protocol>, when its tools include list_notes).
    default = default_preamble(workspace, spec.tools, day, hints=options.behavioral_hints) if options.preamble else ""
    preamble = "\n\n".join(p for p in (default, notes_protocol(spec.tools), agents_directory(spec)) if p)
    return spec.model_copy(update={"preamble": preamble, "aux_model": options.aux_model, "tool_edition": TOOL_EDITION})


def check_policies(spec: AgentSpec, workspace: Path) -> None:
    """The tool names of the approval policies a new session records, against the tools its agents have (the
    main agent's and each sub-agent's as it would be spawned, MCP tools as the servers listed them just now):
    a misspelt name would otherwise match nothing, silently (runtime/approval_policy.py)."""
    policies = [spec.approvals, *(a.approvals for a in spec.registry)]
    if not any(p is not None and (p.require or p.allow) for p in policies):
        return
    agents = [spec, *(child_spec(spec, definition) for definition in spec.registry)]
    tools = {name for agent in agents for name in agent_toolbox(agent, workspace).tools}
    check_tool_names(policies, tools)


def ignored_in_code(sid: object, recorded: AgentSpec, registry: AgentRegistry, max_iterations: int | None = None) -> str | None:
    """The note for an Agent given in code to a continued session whose recorded agent it does not match: the
    session keeps its recorded tools, sub-agents (each whole: description, instructions, model, tools, limits,
    checks), MCP servers, instructions, guardrails, middleware, hooks, approval policy, doom-loop limit,
    description, max_iterations, max_depth, system prompt, bootstrap files and auxiliary model (resume, a worker
    and replay rebuild them from the record), as `--tools` and `--agents` are ignored on a continued session,
    with a note. `max_iterations`: the run's own (`run(max_iterations=)`), which applies to this run instead.

    Only what the record can show was not used is said. max_iterations is said only when the program set it on
    the Agent (`registry.max_iterations`) and the run gave none: a session started by `run(agent, max_iterations=5)`
    recorded 5, and the same Agent, its default 20 untouched, continuing it gave nothing that was dropped.
    `bootstrap=True` on a session whose record holds no AGENTS.md, TOOLS.md or MEMORY.md is not said either: the
    record cannot tell bootstrap off from a workspace that had none of them then."""
    from ..agents.registry import ORCHESTRATION_NAMES
    from ..skills import LoadSkill

    added = (*ORCHESTRATION_NAMES, LoadSkill.name)  # added by Chronicle when the session started, not given
    given, kept = registry.main, recorded
    differs = []
    if set(given.tools) != {t for t in kept.tools if t not in added}:
        differs.append("tools")
    if {a.name: sub_agent_as_given(a) for a in registry.agents} != {a.name: sub_agent_as_given(a) for a in kept.registry}:
        differs.append("sub-agents")
    if set(registry.mcp) != {e.get("server") for e in kept.mcp_tools}:
        differs.append("MCP servers")
    if given.instructions != kept.instructions:
        differs.append("instructions")
    # The checks and wrappers are recorded as given (import paths and options), so any difference is the program's.
    differs += [name for name in ("guardrails", "middleware", "hooks") if getattr(given, name) != getattr(kept, name)]
    if given.approvals is not None and given.approvals != kept.approvals:  # None: the workspace's, decided when it started
        differs.append("approvals")
    doom_loop = (given.limits or {}).get("doom_loop")
    if doom_loop is not None and doom_loop != (kept.limits or {}).get("doom_loop"):
        differs.append("doom_loop")
    # Agent(limits=...): only the ones given, each against what the session recorded (flags and the file included).
    if any(value != (kept.limits or {}).get(name) for name, value in (given.limits or {}).items() if name != "doom_loop"):
        differs.append("limits")
    # Agent(compaction=..., effects=...): only the keys given, each against what the session recorded.
    if any(value != (kept.compaction or {}).get(name) for name, value in (given.compaction or {}).items()):
        differs.append("compaction")
    if any(value != getattr(kept, name) for name, value in registry.effects):
        differs.append("effects")
    if given.description != kept.description:
        differs.append("description")
    if max_iterations is None and registry.max_iterations is not None and registry.max_iterations != kept.max_iterations:
        differs.append("max_iterations")
    if given.max_depth != kept.max_depth:
        differs.append("max_depth")
    # None: chronicle.toml's [agent] / [models] decided when the session started, as approvals.
    if registry.preamble is not None and registry.preamble != kept.preamble.startswith(PREAMBLE_OPENING):
        differs.append("preamble")
    if registry.bootstrap is False and (kept.project_files or kept.memory):
        differs.append("bootstrap")
    if registry.aux_model is not None and registry.aux_model != kept.aux_model:
        differs.append("aux_model")
    if not differs:
        return None
    return (f"note: the Agent's {', '.join(differs)} ignored; session {sid} keeps those recorded when it started "
            "(start a new session to use these)")


def sub_agent_as_given(definition: AgentSpec) -> dict[str, object]:
    """A sub-agent definition as a program gives it: without what the session added when it started (the MCP tools
    its servers listed, the names its import paths held), its tools in any order."""
    shape = definition.model_dump(exclude={"mcp_tools", "import_tools", "tools"})
    shape["tools"] = sorted(set(definition.tools))
    return shape
