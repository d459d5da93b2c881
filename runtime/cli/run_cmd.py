"""`chronicle run`: record the input, run the turn, stream what happens, exit with its outcome."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Annotated, Any, Optional
from uuid import UUID

import typer

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.agents.registry import RegistryError, find_registry
from chronicle.runtime.live import AgentEnd, AgentStart, Broker
from chronicle.runtime.loop import AgentLoop, LoopOptions, TurnOutcome
from chronicle.runtime.providers import ProviderConfigError, default_model, default_provider_name, make_provider
from chronicle.runtime.retry import RetryPolicy, RetrySettingError
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.tools import toolbox_for

from .common import DbOption, JsonOption, WorkspaceOption, cli_errors, err_console, fail, open_store
from .render import HumanRenderer, JsonLinesRenderer

ProviderOption = Annotated[
    Optional[str],
    typer.Option("--provider", help="anthropic | scripted:PATH [default: anthropic when ANTHROPIC_API_KEY is set]", show_default=False),
]
ModelOption = Annotated[Optional[str], typer.Option("--model", envvar="CHRONICLE_MODEL", help="Model name", show_default=False)]
AgentsOption = Annotated[
    Optional[Path],
    typer.Option("--agents", help="Agent registry: a TOML file with one agents.NAME table per agent (default: chronicle.toml in the workspace, if present)",
                 show_default=False),
]
MaxAttemptsOption = Annotated[
    Optional[int],
    typer.Option("--max-attempts", envvar="CHRONICLE_MAX_ATTEMPTS", min=1, show_default=False,
                 help="Tries per model call, the first included, for rate limits, overloads and network errors [default: 8]"),
]


def retry_policy(max_attempts: int | None) -> RetryPolicy:
    try:
        return RetryPolicy.from_env(max_attempts)
    except RetrySettingError as exc:
        fail(str(exc), 2)


def resolve_workspace(workspace: Path | None) -> Path:
    path = (workspace or Path.cwd()).expanduser().resolve()
    if not path.is_dir():
        fail(f"workspace {path} is not a directory; pass an existing one with --workspace", 2)
    return path


async def drive_session(loop: AgentLoop, session_id: UUID) -> TurnOutcome | None:
    """Run the session's next turn with agent_start/agent_end around it; Ctrl-C cancels the turn."""
    session = loop.store.session(session_id)
    spec = session.spec
    links = {
        "parent_session_id": str(session.parent_session_id) if session.parent_session_id else None,
        "parent_tool_call_id": str(session.parent_tool_call_id) if session.parent_tool_call_id else None,
    }
    await loop.emit(AgentStart(session_id=str(session_id), agent=spec.name, depth=spec.depth, **links))
    task = asyncio.ensure_future(loop.run_next(session_id))
    event_loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            event_loop.add_signal_handler(sig, task.cancel)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        outcome = await task
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                event_loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                pass
    status = outcome.status if outcome else "idle"
    await loop.emit(AgentEnd(session_id=str(session_id), agent=spec.name, status=status, reason=outcome.reason if outcome else None, **links))
    return outcome


def build_loop(store: ChronicleStore, spec: AgentSpec, provider_name: str | None, model: str | None, workspace: Path,
               options: LoopOptions, renderer: Any) -> AgentLoop:
    try:
        provider = make_provider(provider_name, model or spec.model or None)
    except ProviderConfigError as exc:
        fail(str(exc), 2)
    broker = Broker()
    broker.subscribe(renderer)
    return AgentLoop(store, provider, toolbox_for(spec.tools), workspace, broker=broker, options=options)


def report(outcome: TurnOutcome | None, as_json: bool) -> int:
    if outcome is None:
        return 0
    if outcome.status == "failed":
        err_console.print(f"[red]error:[/] turn failed: {outcome.reason}")
    elif outcome.status == "awaiting_approval":
        err_console.print(
            f"[yellow]paused:[/] {outcome.reason}. Approve with `chronicle approve {outcome.session_id}` "
            f"(or deny), then `chronicle resume {outcome.session_id}`; or re-run with --yes."
        )
    elif outcome.status == "cancelled":
        err_console.print(f"[yellow]cancelled:[/] {outcome.reason}")
    elif outcome.status == "stopped":
        err_console.print(f"[red]stopped:[/] {outcome.reason}")
    elif not as_json:
        err_console.print(f"[dim]session {outcome.session_id}[/]")
    return outcome.exit_code


def run(
    prompt: Annotated[str, typer.Argument(help="What to ask the agent")],
    session: Annotated[Optional[str], typer.Option("--session", help="Continue this session (id or unique prefix)")] = None,
    provider: ProviderOption = None,
    model: ModelOption = None,
    workspace: WorkspaceOption = None,
    max_iterations: Annotated[
        Optional[int], typer.Option("--max-iterations", min=1, help="Model calls allowed in one turn (default: the agent's max_iterations, 20)", show_default=False)
    ] = None,
    agents: AgentsOption = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Approve tools that require approval (bash)")] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
    max_attempts: MaxAttemptsOption = None,
) -> None:
    """Run one turn: record PROMPT, let the agent work, print the answer as it streams."""
    with cli_errors():
        if not prompt.strip():
            fail("the prompt is empty; say what the agent should do", 2)
        store = open_store(db)
        ws = resolve_workspace(workspace)
        if session:
            sid = store.resolve_session_id(session)
            existing = store.session(sid)
            if existing.status != "idle":
                fail(f"session {sid} has a turn in flight; continue it with `chronicle resume {sid}`", 1)
            spec = existing.spec
            if agents is not None:
                err_console.print(f"[dim]note: --agents ignored; session {sid} keeps the agents recorded when it started[/]")
            provider_name = provider or spec.provider or default_provider_name()
            loop = build_loop(store, spec, provider_name, model, ws, LoopOptions(max_iterations=max_iterations, auto_approve=yes, retry=retry_policy(max_attempts)),
                              JsonLinesRenderer() if as_json else HumanRenderer())
            submit_input(store, sid, prompt)
        else:
            provider_name = provider or default_provider_name()
            try:
                registry = find_registry(agents, ws)
            except RegistryError as exc:
                fail(str(exc), 2)
            spec = registry.main_spec(
                provider=provider_name or "", workspace=str(ws), max_iterations=max_iterations,
                model=model or registry.main.model or ("scripted" if (provider_name or "").startswith("scripted:") else default_model()),
            )
            loop = build_loop(store, spec, provider_name, model, ws, LoopOptions(max_iterations=max_iterations, auto_approve=yes, retry=retry_policy(max_attempts)),
                              JsonLinesRenderer() if as_json else HumanRenderer())
            created, _ = start_session(store, spec, prompt)
            sid = created.id
        outcome = asyncio.run(drive_session(loop, sid))
        raise typer.Exit(report(outcome, as_json))
