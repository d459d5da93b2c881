"""Continuing work across processes: resume, approve, deny, submit, worker.

A turn survives its process: whatever was in flight when a process died, paused for an
approval, or was queued and never started is found in the store and continued, under the
session's lease so that two processes never advance one session together.
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import Annotated, Any, Callable, Optional
from uuid import UUID

import typer
from eventsourcing.persistence import IntegrityError
from rich.markup import escape

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.errors import DomainError
from chronicle.domain.tool_call import ToolCall
from chronicle.runtime.agents.registry import RegistryError, find_registry
from chronicle.runtime.assembly import LoopSetupError, build_loop
from chronicle.runtime.leases import DEFAULT_LEASE_S, current_lease
from chronicle.runtime.live import AgentEnd, AgentStart, Broker
from chronicle.runtime.loop import LoopOptions, TurnOutcome
from chronicle.runtime.providers import default_model, default_provider_name
from chronicle.runtime.self_repair import DEFAULT_STUCK_AFTER_S, DEFAULT_TOOL_FAILURES, SelfRepair
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.worker import (
    Overrides, ResumeError, Worker, WorkerOptions, advance_session, loop_for_session, needs_work, normalise_provider,
    pending_approvals, sessions_needing_work, worker_name,
)

from .common import DbOption, JsonOption, WorkspaceOption, cli_errors, err_console, fail, open_store, out_console, print_json
from .limits import LimitFlags, limit_options
from .render import HumanRenderer, JsonLinesRenderer
from .repairs_cmd import FailuresOption, StuckOption
from .run_cmd import ModelOption, ProviderOption, report, resolve_workspace

LeaseOption = Annotated[float, typer.Option("--lease-s", min=0.5, help="Seconds a session stays claimed without renewal")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Approve tools that require approval (bash)")]


@limit_options
def resume(
    session: Annotated[Optional[str], typer.Argument(help="Session id or unique prefix", show_default=False)] = None,
    all_sessions: Annotated[bool, typer.Option("--all", help="Every session with a turn in flight or queued input")] = False,
    yes: YesOption = False,
    provider: ProviderOption = None,
    model: ModelOption = None,
    workspace: WorkspaceOption = None,
    lease_s: LeaseOption = DEFAULT_LEASE_S,
    as_json: JsonOption = False,
    db: DbOption = None,
    limits: LimitFlags = LimitFlags(),
) -> None:
    """Continue turns found in flight and run recorded inputs that never started.

    Limits apply as in `run` (flags first, then the limits table in the session workspace's chronicle.toml); a guard stop exits 4.
    """
    with cli_errors():
        if not session and not all_sessions:
            fail("name a SESSION to resume, or pass --all", 2)
        store = open_store(db)
        if session:
            sid = store.resolve_session_id(session)
            record = store.session(sid)
            if needs_work(store, record, yes) is None:
                waiting = pending_approvals(store, record)
                if waiting:
                    names = ", ".join(sorted({c.name for c in waiting}))
                    err_console.print(f"[yellow]paused:[/] session {sid} awaits approval of {names}: "
                                      f"`chronicle approve {sid}` or `chronicle deny {sid}` first, or resume with --yes")
                    raise typer.Exit(3)
                nothing(sid, f"session {sid} has no turn in flight and no queued input", as_json)
                return
            targets = [sid]
        else:
            targets = sessions_needing_work(store, yes)
            if not targets:
                nothing(None, "no session has a turn in flight or a queued input", as_json)
                return
        broker = Broker()
        broker.subscribe(JsonLinesRenderer() if as_json else HumanRenderer())
        overrides = Overrides(
            provider=normalise_provider(provider), model=model,
            workspace=resolve_workspace(workspace) if workspace else None, options=LoopOptions(auto_approve=yes), limits=limits,
        )
        holder = worker_name()
        code, setup_failed = 0, False
        for sid in targets:
            try:
                outcomes = asyncio.run(resume_one(store, sid, overrides, broker, holder, lease_s, yes))
            except ResumeError as exc:
                # One session that cannot be resumed (its script or workspace is gone) must not
                # hold back the others: say why on one line and go on, as the worker does.
                if len(targets) == 1:
                    fail(str(exc), 2)
                err_console.print(f"[red]error:[/] {escape(str(exc))}")
                setup_failed = True
                continue
            if outcomes is None:
                lease = current_lease(store, sid)
                until = lease.expires_at.isoformat() if lease and lease.expires_at else "?"
                err_console.print(f"[yellow]busy:[/] session {sid} is being advanced by {lease.holder if lease else 'another process'} "
                                  f"(lease until {until}); try again later")
                code = code or 1
                continue
            for outcome in outcomes:
                code = code or report(outcome, as_json)
        raise typer.Exit(code or (2 if setup_failed else 0))


def nothing(sid: object, message: str, as_json: bool) -> None:
    """Nothing to resume is an answer, not an error: exit 0, as JSON too when asked."""
    if as_json:
        print_json({"session_id": str(sid) if sid else None, "status": "nothing_to_resume", "message": message})
    else:
        out_console.print(f"nothing to resume: {message}", soft_wrap=True)


async def resume_one(store: ChronicleStore, sid: UUID, overrides: Overrides, broker: Broker, holder: str,
                     lease_s: float, yes: bool) -> list[TurnOutcome] | None:
    """Advance one session under its lease, with agent_start/agent_end around it as `run` emits them.

    The loop is built before agent_start, so a session that cannot be resumed raises ResumeError
    without a dangling start event.
    """
    record = store.session(sid)
    spec = record.spec
    links = {
        "parent_session_id": str(record.parent_session_id) if record.parent_session_id else None,
        "parent_tool_call_id": str(record.parent_tool_call_id) if record.parent_tool_call_id else None,
        "depth": spec.depth,
    }
    loop = loop_for_session(store, record, overrides, broker)
    await broker.emit(AgentStart(session_id=str(sid), agent=spec.name, **links))
    outcomes = await advance_session(store, sid, lambda s: loop, holder, lease_s, auto_approve=yes)
    if outcomes is None:
        status, reason = "busy", "another process holds the session"
    elif outcomes:
        status, reason = outcomes[-1].status, outcomes[-1].reason
    else:
        status, reason = "idle", None
    await broker.emit(AgentEnd(session_id=str(sid), agent=spec.name, status=status, reason=reason, **links))
    return outcomes


def _decide(store: ChronicleStore, session: str, tool_call: str | None, decide: Callable[[ToolCall, object], None],
            always: bool = False) -> tuple[object, list[ToolCall]]:
    """Apply a decision to the chosen waiting calls (and the session) in one transaction."""
    from chronicle.runtime.clock import SYSTEM_CLOCK

    sid = store.resolve_session_id(session)
    for _ in range(20):
        record = store.session(sid)
        waiting = pending_approvals(store, record)
        if not waiting:
            fail(f"session {sid} has no tool call awaiting approval; `chronicle history {sid}` shows where it stands")
        chosen = waiting
        if tool_call:
            chosen = [c for c in waiting if str(c.id).startswith(tool_call.lower()) or c.tool_use_id == tool_call]
            if len(chosen) != 1:
                listed = ", ".join(f"{c.id} ({c.name}, {c.tool_use_id})" for c in waiting)
                fail(f"{'no' if not chosen else 'more than one'} tool call awaiting approval matches {tool_call!r}; awaiting: {listed}")
        now = SYSTEM_CLOCK.now()
        try:
            for call in chosen:
                decide(call, now)
                if always:
                    record.allow_always(call.name, now)
        except DomainError as exc:
            fail(str(exc))
        try:
            store.save(*chosen, record)
            return sid, chosen
        except IntegrityError:
            continue
    fail(f"session {sid} kept changing while recording the decision; try again")


def approve(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix")],
    tool_call: Annotated[Optional[str], typer.Option("--tool-call", help="Only this tool call (id, id prefix or tool_use id)")] = None,
    always: Annotated[bool, typer.Option("--always", help="Also allow this tool without asking for the rest of the session")] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Approve tool calls of a paused turn (all of them unless --tool-call); then `resume` continues it."""
    with cli_errors():
        store = open_store(db)
        sid, chosen = _decide(store, session, tool_call, lambda c, now: c.approve(now, by="user", always=always), always)
        _decided(sid, chosen, "approved", as_json)


def deny(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix")],
    tool_call: Annotated[Optional[str], typer.Option("--tool-call", help="Only this tool call (id, id prefix or tool_use id)")] = None,
    reason: Annotated[str, typer.Option("--reason", help="What the model is told")] = "denied by the user",
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Deny tool calls of a paused turn; the model reads the denial when `resume` continues the turn."""
    with cli_errors():
        store = open_store(db)
        sid, chosen = _decide(store, session, tool_call, lambda c, now: c.deny(now, reason=reason))
        _decided(sid, chosen, "denied", as_json)


def _decided(sid: object, chosen: list[ToolCall], verb: str, as_json: bool) -> None:
    if as_json:
        for call in chosen:
            print_json({"session_id": str(sid), "tool_call_id": str(call.id), "tool_use_id": call.tool_use_id, "name": call.name, "status": call.status})
        return
    from .render import short, whole_input

    for call in chosen:
        out_console.print(f"{verb} {escape(short(call.name))} ({call.id}):")
        out_console.print(escape(whole_input(call.input)), style="dim")
    out_console.print(f"continue the turn with `chronicle resume {sid}`")


def submit(
    prompt: Annotated[str, typer.Argument(help="What to ask the agent")],
    session: Annotated[Optional[str], typer.Option("--session", help="Queue on this session (id or unique prefix)")] = None,
    provider: ProviderOption = None,
    model: ModelOption = None,
    workspace: WorkspaceOption = None,
    max_iterations: Annotated[int, typer.Option("--max-iterations", min=1, help="Model calls allowed in one turn")] = 20,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Record PROMPT durably for a worker to run, and print the session id."""
    with cli_errors():
        if not prompt.strip():
            fail("the prompt is empty; say what the agent should do", 2)
        store = open_store(db)
        if session:
            if provider or model or workspace:
                fail("--provider/--model/--workspace apply to new sessions; a session keeps what it recorded", 2)
            sid = store.resolve_session_id(session)
            input_id = submit_input(store, sid, prompt)
        else:
            provider_name = normalise_provider(provider or default_provider_name())
            if not provider_name:
                fail("no model provider: set ANTHROPIC_API_KEY to use Claude, or pass --provider scripted:PATH", 2)
            ws = resolve_workspace(workspace)
            spec = checked_spec(store, provider_name, model, ws, max_iterations)
            created, input_id = start_session(store, spec, prompt)
            sid = created.id
        if as_json:
            print_json({"session_id": str(sid), "input_id": input_id})
        else:
            print(sid)


def checked_spec(store: ChronicleStore, provider_name: str, model: str | None, ws: Path, max_iterations: int) -> AgentSpec:
    """The spec `run` would record, checked as `run` checks it before anything is recorded.

    A worker runs the input later, elsewhere: an unknown provider, a missing script or a bad
    chronicle.toml found then would leave a queued input nobody can run, so they exit 2 now.
    """
    try:
        registry = find_registry(None, ws)
    except RegistryError as exc:
        fail(str(exc), 2)
    spec = registry.main_spec(
        provider=provider_name, workspace=str(ws), max_iterations=max_iterations,
        model=model or registry.main.model or ("scripted" if provider_name.startswith("scripted:") else default_model(provider_name)),
    )
    try:
        build_loop(store, spec, provider_name=provider_name, model=model, workspace=ws)
    except LoopSetupError as exc:
        fail(str(exc), 2)
    return spec


def worker_routines(store: ChronicleStore, overrides: Overrides, holder: str) -> Any:
    """The routines of the worker's workspace (--workspace, else the current directory), or None if it declares none."""
    from chronicle.runtime.routines import load_routines

    ws = overrides.workspace or resolve_workspace(None)
    if not load_routines(ws):
        return None
    from .routines_cmd import engine_for

    engine = engine_for(store, ws, overrides.provider, overrides.model)
    engine.holder = holder
    return engine


@limit_options
def worker(
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Sessions advanced at once")] = 4,
    once: Annotated[bool, typer.Option("--once", help="Exit as soon as no session needs work")] = False,
    idle_exit: Annotated[Optional[float], typer.Option("--idle-exit", min=0, help="Exit after this many idle seconds")] = None,
    poll: Annotated[float, typer.Option("--poll", min=0.05, help="Seconds between looks for new work")] = 0.5,
    lease_s: LeaseOption = DEFAULT_LEASE_S,
    yes: YesOption = False,
    provider: ProviderOption = None,
    model: ModelOption = None,
    workspace: WorkspaceOption = None,
    stuck_after: StuckOption = DEFAULT_STUCK_AFTER_S,
    tool_failures: FailuresOption = DEFAULT_TOOL_FAILURES,
    db: DbOption = None,
    limits: LimitFlags = LimitFlags(),
) -> None:
    """Process queued inputs (FIFO per session) and turns left in flight, alongside other workers.

    SIGTERM or Ctrl-C: finish the turns in hand, then exit; a second one exits at once (the turns stay in flight and another worker takes them over when the lease runs out).
    """
    with cli_errors():
        store = open_store(db)
        overrides = Overrides(
            provider=normalise_provider(provider), model=model,
            workspace=resolve_workspace(workspace) if workspace else None, options=LoopOptions(auto_approve=yes), limits=limits,
        )
        w = Worker(store, overrides, WorkerOptions(concurrency, poll, lease_s, idle_exit, once),
                   log=lambda m: err_console.print(m, markup=False, highlight=False))
        w.routines = worker_routines(store, overrides, w.name)
        w.repair = SelfRepair(store, stuck_after_s=stuck_after, tool_failures=tool_failures, cursor=store.max_position())

        async def main() -> int:
            event_loop = asyncio.get_running_loop()
            signals = {"count": 0}

            def on_signal() -> None:
                signals["count"] += 1
                if signals["count"] > 1:
                    os._exit(143)
                w.drain()

            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    event_loop.add_signal_handler(sig, on_signal)
                except (NotImplementedError, RuntimeError):
                    pass
            return await w.run()

        raise typer.Exit(asyncio.run(main()))
