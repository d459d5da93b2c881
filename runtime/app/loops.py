"""The one place a loop is put together: provider, toolbox, workspace, guards, compactor, title.

`run`, `chat`, `demo`, `resume`, the worker and the public API all build their loops here, so a
turn gets the same guards (budgets, rates, tool-call limit, doom loop), the same automatic
compaction and the same title call whichever client happens to run it — a session resumed by a
worker must not escape the budget it was started under. Settings and titles are application
policy, composed here; the loop (runtime/loop.py) only runs what it is handed. Sub-agents get
the spawn of their parent's I/O bundle (runtime/loop_io.py), with their own toolbox.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.session import Session

from ..agents.tree import lineage
from ..clock import SYSTEM_CLOCK, Clock
from ..compaction import Compactor
from ..control_port import StoreControls
from ..environment import EnvironmentSettingError, environment
from ..guardrails import GuardrailHook, guardrails_along, guardrails_for, recorded_guardrails
from ..hooks import Hooks
from ..live import Broker
from ..loop import AgentLoop, LoopOptions
from ..middleware import Around, middleware_for, recorded_middleware
from ..providers import ProviderConfigError, default_provider_name, make_provider
from ..providers.base import Provider
from ..settings import LimitFlags, Settings, SettingsError, load_settings
from ..store import ChronicleStore
from ..telemetry import live_tracing
from ..titles import TitleHook
from ..tools.base import Toolbox, ToolError
from ..tools.imports import ToolGone
from ..tools.tool_env import configured_names
from ..toolsets import agent_toolbox, toolbox_for
from ..user_hooks import NamedHook, hooks_along, hooks_for, recorded_hooks
from .model_change import unused_thinking_budget
from .spend import ProjectionSpend
from .vanished_tools import VanishedTool, checked_tools


class LoopSetupError(ValueError):
    """The loop cannot be built as asked (no provider, workspace gone, bad chronicle.toml); the message says what to pass."""


def provider_for(spec: AgentSpec, provider_name: str | None = None, model: str | None = None, where: str = "") -> Provider:
    """The provider recorded on the spec unless one is named; a setup problem is a LoopSetupError."""
    name = provider_name or spec.provider or default_provider_name()
    try:
        return make_provider(name, model or spec.model or None)
    except (ProviderConfigError, ValueError) as exc:
        raise LoopSetupError(f"{where}{exc}") from None


@dataclass(frozen=True)
class LoopParts:
    """What a loop is built from that needs no store: each piece checked as it is made."""

    provider: Provider
    workspace: Path
    settings: Settings
    toolbox: Toolbox
    guardrails: list[Any]
    middleware: list[tuple[str, Around]]
    hooks: list[NamedHook]


def loop_parts(
    spec: AgentSpec,
    *,
    session: Session | None = None,
    provider_name: str | None = None,
    model: str | None = None,
    workspace: Path | None = None,
    settings: Settings | None = None,
    limits: LimitFlags | None = None,
    recorded: bool = False,
) -> LoopParts:
    """The provider, workspace, settings, tools, guardrails, middleware and hooks `spec` asks for, or the
    LoopSetupError that says what to pass. No store is touched: a command checks a new session's
    setup with this before it opens (and so creates) a store. `recorded`: `spec` is a stored session's, given
    without the session (`session` says so too)."""
    where = f"session {session.id}: " if session is not None else ""
    if session is not None and not (provider_name or spec.provider or default_provider_name()):
        raise LoopSetupError(f"session {session.id} has no recorded provider; pass --provider anthropic or scripted:PATH")
    provider = provider_for(spec, provider_name, model, where)
    path = (workspace or Path(spec.workspace or ".")).expanduser().resolve()
    if not path.is_dir():
        raise LoopSetupError(f"{where}workspace {path} is gone; pass --workspace DIR")
    if settings is None:
        try:
            settings = load_settings(limits or LimitFlags(), path, spec.limits, compaction=spec.compaction)
        except SettingsError as exc:
            raise LoopSetupError(f"{where}{exc}") from None
    # A recorded session's path whose tool was deleted or renamed since is left out here and checked against its
    # history (refuse_vanished_tools), as a list path that holds fewer tools is; a new session's is refused here.
    lenient: Callable[[], list[ToolGone] | None] = (lambda: []) if session is not None or recorded else (lambda: None)
    try:
        toolbox = agent_toolbox(spec, path, lenient())
        for sub_agent in spec.registry:  # a sub-agent's tools fail now, before anything is recorded, not when it is asked
            toolbox_for(sub_agent.tools, path, lenient())
    except ValueError as exc:
        raise LoopSetupError(f"{where}{exc}") from None
    try:
        environment()
    except EnvironmentSettingError as exc:
        raise LoopSetupError(str(exc)) from None
    try:  # bash's extra variables: a bad name would otherwise fail every bash call of the session, recorded
        configured_names(path, os.environ)
    except ToolError as exc:
        raise LoopSetupError(f"{where}{exc}") from None
    try:
        guardrails = guardrails_for(spec.guardrails, path)
        middleware = middleware_for(spec.middleware, path)
        hooks = hooks_for(spec.hooks, path)
        for sub_agent in spec.registry:  # a sub-agent's own fail now too, not when it is asked
            recorded_guardrails(sub_agent.guardrails, path)
            recorded_middleware(sub_agent.middleware, path)
            recorded_hooks(sub_agent.hooks, path)
    except SettingsError as exc:
        raise LoopSetupError(f"{where}{exc}") from None
    return LoopParts(provider, path, settings, toolbox, guardrails, middleware, hooks)


def build_loop(
    store: ChronicleStore,
    target: Session | AgentSpec,
    *,
    provider_name: str | None = None,
    model: str | None = None,
    workspace: Path | None = None,
    options: LoopOptions | None = None,
    settings: Settings | None = None,
    limits: LimitFlags | None = None,
    broker: Broker | None = None,
    approver: Any = None,
    interactive: bool = False,
    clock: Clock = SYSTEM_CLOCK,
    say: Callable[[str], Any] | None = None,
    recorded: bool = False,
) -> AgentLoop:
    """A loop for a stored session (or a spec about to start one), with what was recorded unless overridden.

    Provider and workspace default to the ones recorded in the spec; the model of every request is the
    session's recorded one (record a change with app/model_change.py). `settings` are
    used as given; otherwise they are read from `limits` plus the workspace's chronicle.toml.
    `say` hears each `note:` line about something given that this loop does not use (a CLI prints it, the
    library warns of it); without it they are not said. `recorded`: a spec given is a stored session's (which the
    caller checks with refuse_vanished_tools), so a path whose tool is gone since is left out rather than refused.
    """
    session = target if isinstance(target, Session) else None
    spec = target.spec if isinstance(target, Session) else target
    parts = loop_parts(spec, session=session, provider_name=provider_name, model=model, workspace=workspace,
                       settings=settings, limits=limits, recorded=recorded)
    notes: list[str | None] = [] if session is None else [*refuse_vanished_tools(store, session, parts.toolbox, parts.workspace)]
    notes.append(unused_thinking_budget(provider_name or spec.provider or default_provider_name() or ""))
    for note in notes:
        if note and say is not None:
            say(note)
    options = options or LoopOptions()
    options = replace(options, tool_timeout_s=parts.settings.tool_timeout_s, max_tokens=options.max_tokens or environment().max_tokens)
    # `model` picks the provider's default only: every request asks the model the session recorded
    # (its spec, or its newest Session.ModelChanged), so no process runs a turn on an unrecorded one.
    hooks = Hooks(parts.settings.hooks(ProjectionSpend(store), interactive=interactive))
    guardrails, own = parts.guardrails, parts.hooks
    if session is not None and session.parent_session_id is not None:
        guardrails, own = checks_under(store, session, parts.workspace)
    if guardrails:
        hooks.add(GuardrailHook(guardrails))
    for hook in own:  # the user's, after the guards and guardrails, in declaration order
        hooks.add(hook)
    hooks.add(TitleHook(parts.provider, store, clock))
    tracer = live_tracing(store)
    if tracer is not None:
        hooks.add(tracer)
    return assemble(store, parts.provider, parts.toolbox, parts.workspace, options, broker=broker, clock=clock, approver=approver,
                    hooks=hooks, compactor=parts.settings.compactor(), middleware=parts.middleware)


def refuse_vanished_tools(store: ChronicleStore, session: Session, toolbox: Toolbox, workspace: Path) -> list[str]:
    """A continued session whose history (or that of a sub-agent session it goes on with) called one of the user's
    tools that its recorded import path no longer holds is refused, naming the tool and the path: continuing would
    quietly take away a tool the conversation used, with nothing recorded to say why. Refusing records nothing and
    loses nothing: put the tool back, or start a new session. A tool it had and never called is a note instead
    (returned), and so is a path whose tool was deleted or renamed. Built-in and MCP tools are recorded by name or
    whole and cannot vanish so (app/vanished_tools.py)."""
    try:
        return checked_tools(store, session, toolbox, workspace)
    except VanishedTool as exc:
        raise LoopSetupError(str(exc)) from None


def checks_under(store: ChronicleStore, session: Session, workspace: Path) -> tuple[list[Any], list[NamedHook]]:
    """The checks and the user's hooks a session runs under, a sub-agent's resumed on its own included (after
    an approval): its parents', from the top-level session down, then its own, as when its parent spawned it."""
    try:
        specs = [s.spec for s in lineage(store, session)]
        return guardrails_along([s.guardrails for s in specs], workspace), hooks_along([s.hooks for s in specs], workspace)
    except SettingsError as exc:
        raise LoopSetupError(f"session {session.id}: {exc}") from None


def assemble(store: ChronicleStore, provider: Provider, toolbox: Toolbox, workspace: Path, options: LoopOptions, *,
             broker: Broker | None = None, clock: Clock = SYSTEM_CLOCK, approver: Any = None, hooks: Hooks | None = None,
             compactor: Compactor | None = None, middleware: list[tuple[str, Around]] | None = None) -> AgentLoop:
    """The loop from parts already decided: build_loop's last step, and replay's whole one
    (a scratch store, the recording as provider, no guards or titles)."""
    return AgentLoop(store, provider, toolbox, workspace, broker=broker, options=options, clock=clock, approver=approver,
                     hooks=hooks, compactor=compactor, controls=StoreControls(store), middleware=middleware)


def compaction_loop(store: ChronicleStore, session: Session, provider_name: str | None = None, broker: Broker | None = None,
                    clock: Clock = SYSTEM_CLOCK) -> AgentLoop:
    """A loop that only compacts (`chronicle compact`): the session's provider, no tools, and a
    workspace that need not exist any more — a summary reads the log, never the files."""
    provider = provider_for(session.spec, provider_name, where=f"session {session.id}: ")
    return assemble(store, provider, Toolbox([]), Path(session.spec.workspace or "."), LoopOptions(), broker=broker, clock=clock)
