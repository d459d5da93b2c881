"""`chronicle run`: record the input, run the turn, stream what happens, exit with its outcome."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Annotated, Any, Optional
from uuid import UUID

import typer
from rich.markup import escape

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.agents.registry import RegistryError, find_registry
from chronicle.runtime.assembly import LoopSetupError, build_loop
from chronicle.runtime.live import AgentEnd, AgentStart, Broker
from chronicle.runtime.loop import AgentLoop, LoopOptions, TurnOutcome
from chronicle.runtime.providers import default_model, default_provider_name
from chronicle.runtime.retry import RetryPolicy, RetrySettingError
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.worker import normalise_provider

from .common import DbOption, JsonOption, WorkspaceOption, cli_errors, err_console, fail, open_store
from .limits import LimitFlags, limit_options, resolve_limits
from .render import HumanRenderer, JsonLinesRenderer, printable

ProviderOption = Annotated[
    Optional[str],
    typer.Option("--provider", help="anthropic | openai-compatible | scripted:PATH (default: anthropic when ANTHROPIC_API_KEY is set)", show_default=False),
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
                 help="Tries per model call, the first included, for rate limits, overloads and network errors (default: 8)"),
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


async def drive_session(loop: AgentLoop, session_id: UUID, drain: bool = True) -> TurnOutcome | None:
    """Run the session's turns with agent_start/agent_end around them; Ctrl-C cancels the turn.

    With ``drain`` the session's queue is emptied: inputs queued by other processes while this
    one was busy run next, in order, as long as each turn completes.
    """
    session = loop.store.session(session_id)
    spec = session.spec
    links = {
        "parent_session_id": str(session.parent_session_id) if session.parent_session_id else None,
        "parent_tool_call_id": str(session.parent_tool_call_id) if session.parent_tool_call_id else None,
    }
    await loop.emit(AgentStart(session_id=str(session_id), agent=spec.name, depth=spec.depth, **links))
    outcome: TurnOutcome | None = None
    while True:
        latest = await run_one(loop, session_id)
        if latest is None:
            break
        outcome = latest
        if not drain or latest.status != "completed":
            break
    status = outcome.status if outcome else "idle"
    await loop.emit(AgentEnd(session_id=str(session_id), agent=spec.name, status=status, reason=outcome.reason if outcome else None,
                            depth=spec.depth, **links))
    return outcome


async def run_one(loop: AgentLoop, session_id: UUID) -> TurnOutcome | None:
    """One turn in its own task, so that SIGINT/SIGTERM cancel the turn and not the process."""
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
    return outcome


def cli_loop(store: ChronicleStore, target: Any, renderer: Any, **kwargs: Any) -> AgentLoop:
    """runtime.assembly.build_loop with the renderer subscribed; a setup error is a one-line error, exit 2."""
    broker = Broker()
    broker.subscribe(renderer)
    try:
        return build_loop(store, target, broker=broker, **kwargs)
    except LoopSetupError as exc:
        fail(str(exc), 2)


def report(outcome: TurnOutcome | None, as_json: bool) -> int:
    """The outcome on one stderr line, always naming the session so a person knows what to `log` or `resume`.

    The live `error` event of the top-level turn is not rendered (HumanRenderer), so this is the
    one place a failure is told; every status that is not `completed` gets its line here.
    """
    if outcome is None:
        return 0
    sid = outcome.session_id
    reason = escape(printable(outcome.reason or outcome.status))
    see = f"(session {sid}; see `chronicle log {sid}`)"
    if outcome.status == "failed":
        err_console.print(f"[red]error:[/] turn failed: {reason} {see}")
    elif outcome.status == "awaiting_approval":
        err_console.print(
            f"[yellow]paused:[/] {reason}. Approve with `chronicle approve {sid}` "
            f"(or deny), then `chronicle resume {sid}`; or re-run with --yes."
        )
    elif outcome.status == "cancelled":
        err_console.print(f"[yellow]cancelled:[/] {reason} {see}")
    elif outcome.status == "stopped":
        err_console.print(f"[red]stopped:[/] {reason} {see}")
    elif outcome.status != "completed":  # interrupted (store lost), conflict, or anything new: the reason says what to do
        err_console.print(f"[red]error:[/] {reason} (session {sid})")
    elif not as_json:
        err_console.print(f"[dim]session {sid}[/]")
    return outcome.exit_code


@limit_options
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
    limits: LimitFlags = LimitFlags(),
) -> None:
    """Run one turn: record PROMPT, let the agent work, print the answer as it streams.

    On a busy session the prompt is queued (durably, before anything else) and runs after the turn in flight; if another process is running that turn, this one exits and that process picks the prompt up. Inputs queued while this process works run before it exits.
    """
    with cli_errors():
        if not prompt.strip():
            fail("the prompt is empty; say what the agent should do", 2)
        store = open_store(db)
        sid = store.resolve_session_id(session) if session else None
        spec = store.session(sid).spec if sid else None
        ws = resolve_workspace(workspace or session_workspace(spec))
        settings = resolve_limits(limits, ws)
        renderer = JsonLinesRenderer() if as_json else HumanRenderer()
        if sid and spec:
            if agents is not None:
                err_console.print(f"[dim]note: --agents ignored; session {sid} keeps the agents recorded when it started[/]")
            provider_name = provider or spec.provider or default_provider_name()
            loop = cli_loop(store, spec, renderer, provider_name=provider_name, model=model, workspace=ws, settings=settings,
                            options=LoopOptions(max_iterations=max_iterations, auto_approve=yes, retry=retry_policy(max_attempts)))
            input_id = submit_input(store, sid, prompt)
            runner = running_elsewhere(store, sid)
            if runner is not None:
                raise typer.Exit(report_queued(loop, sid, input_id, runner, renderer, as_json))
        else:
            provider_name = normalise_provider(provider) or default_provider_name()  # absolute script path: resume finds it
            try:
                registry = find_registry(agents, ws)
                spec = registry.main_spec(  # starts the MCP servers it names, to record their tools
                    provider=provider_name or "", workspace=str(ws), max_iterations=max_iterations,
                    model=model or registry.main.model or ("scripted" if (provider_name or "").startswith("scripted:") else default_model(provider_name)),
                )
            except RegistryError as exc:
                fail(str(exc), 2)
            loop = cli_loop(store, spec, renderer, provider_name=provider_name, model=model, workspace=ws, settings=settings,
                            options=LoopOptions(max_iterations=max_iterations, auto_approve=yes, retry=retry_policy(max_attempts)))
            created, _ = start_session(store, spec, prompt)
            sid = created.id
        outcome = asyncio.run(drive_session(loop, sid))
        raise typer.Exit(report(outcome, as_json))


def session_workspace(spec: AgentSpec | None) -> Path | None:
    """A continued session works where it was started, unless --workspace says otherwise."""
    if spec is not None and spec.workspace and Path(spec.workspace).is_dir():
        return Path(spec.workspace)
    return None


def running_elsewhere(store: ChronicleStore, session_id: UUID) -> UUID | None:
    """The turn another process is running on this session, if any.

    A turn that is `running` (or `pending`) belongs to a live process, as far as the store can
    tell; a turn waiting for approval or found interrupted has no process and is continued here.
    """
    session = store.session(session_id)
    if session.active_turn_id is None:
        return None
    turn = store.turn(session.active_turn_id)
    return turn.id if turn.status in ("running", "pending") else None


def report_queued(loop: AgentLoop, session_id: UUID, input_id: str, turn_id: UUID, renderer: Any, as_json: bool) -> int:
    session = loop.store.session(session_id)
    position = next((i + 1 for i, item in enumerate(session.queue) if item["input_id"] == input_id), len(session.queue))
    reason = (
        f"queued as input {position} of {len(session.queue)}: turn {turn_id} is running in another process, "
        f"which runs this input after it"
    )
    if as_json:
        renderer(AgentEnd(session_id=str(session_id), agent=session.spec.name, status="queued", reason=reason,
                          depth=session.spec.depth))
    else:
        err_console.print(f"[yellow]queued:[/] {reason}. Session {session_id}. If no process is running it any more, "
                          f"continue it with `chronicle resume {session_id}`.")
    return 0
