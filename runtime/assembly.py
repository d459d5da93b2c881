"""The one place an AgentLoop is put together: provider, toolbox, workspace, guards, compactor, title.

`run`, `chat`, `demo`, `resume` and the worker all build their loops here, so a turn gets the
same guards (budgets, rates, tool-call limit, doom loop), the same automatic compaction and the
same title call whichever command happens to run it — a session resumed by a worker must not
escape the budget it was started under. Sub-agents get `child_loop`: their parent's provider,
broker, approver and hooks (so the parent's guards watch them too) and their own toolbox.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.session import Session

from .clock import SYSTEM_CLOCK, Clock
from .guardrails import GuardrailHook, load_guardrails
from .hooks import Hooks
from .live import Broker
from .loop import AgentLoop, LoopOptions
from .providers import ProviderConfigError, default_provider_name, make_provider
from .settings import LimitFlags, Settings, SettingsError, load_settings
from .store import ChronicleStore
from .telemetry import live_tracing
from .titles import TitleHook
from .tools import toolbox_for


class LoopSetupError(ValueError):
    """The loop cannot be built as asked (no provider, workspace gone, bad chronicle.toml); the message says what to pass."""


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
) -> AgentLoop:
    """A loop for a stored session (or a spec about to start one), with what was recorded unless overridden.

    Provider, model and workspace default to the ones recorded in the spec. `settings` are
    used as given; otherwise they are read from `limits` plus the workspace's chronicle.toml.
    """
    session = target if isinstance(target, Session) else None
    spec = target.spec if isinstance(target, Session) else target
    where = f"session {session.id}: " if session is not None else ""
    name = provider_name or spec.provider or default_provider_name()
    if not name:
        if session is not None:
            raise LoopSetupError(f"session {session.id} has no recorded provider; pass --provider anthropic or scripted:PATH")
    try:
        provider = make_provider(name, model or spec.model or None)
    except (ProviderConfigError, ValueError) as exc:
        raise LoopSetupError(f"{where}{exc}") from None
    path = (workspace or Path(spec.workspace or ".")).expanduser().resolve()
    if not path.is_dir():
        raise LoopSetupError(f"{where}workspace {path} is gone; pass --workspace DIR")
    if settings is None:
        try:
            settings = load_settings(limits or LimitFlags(), path)
        except SettingsError as exc:
            raise LoopSetupError(f"{where}{exc}") from None
    try:
        toolbox = toolbox_for(spec.tools, path)
        for sub_agent in spec.registry:  # a sub-agent's tools fail now, before anything is recorded, not when it is asked
            toolbox_for(sub_agent.tools, path)
    except ValueError as exc:
        raise LoopSetupError(f"{where}{exc}") from None
    options = replace(options or LoopOptions(), tool_timeout_s=settings.tool_timeout_s)
    if model:
        options = replace(options, model=model)
    loop = AgentLoop(
        store, provider, toolbox, path, broker=broker, options=options, clock=clock, approver=approver,
        hooks=Hooks(settings.hooks(store, interactive=interactive)), compactor=settings.compactor(),
    )
    try:
        guardrails = load_guardrails(path)
    except SettingsError as exc:
        raise LoopSetupError(f"{where}{exc}") from None
    if guardrails:
        loop.hooks.add(GuardrailHook(guardrails))
    loop.hooks.add(TitleHook(provider, store, loop.clock))
    tracer = live_tracing(store)
    if tracer is not None:
        loop.hooks.add(tracer)
    return loop


def child_loop(parent: AgentLoop, spec: AgentSpec) -> AgentLoop:
    """A sub-agent's loop: the parent's store, provider, workspace, broker, clock, approver, hooks
    (guards included) and compactor; its own toolbox and max_iterations from its spec."""
    options = parent.options
    return AgentLoop(
        parent.store, parent.provider, toolbox_for(spec.tools, parent.workspace), parent.workspace,
        broker=parent.broker, clock=parent.clock, approver=parent.approver, hooks=parent.hooks, compactor=parent.compactor,
        options=LoopOptions(
            max_iterations=None, auto_approve=options.auto_approve, tool_timeout_s=options.tool_timeout_s,
            max_tokens=options.max_tokens, retry=options.retry,
        ),
    )
