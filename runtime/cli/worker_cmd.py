"""Continuing work across processes: resume, approve, deny, submit, worker.

A turn survives its process: whatever was in flight when a process died, paused for an
approval, or was queued and never started is found in the store and continued, under the
session's lease so that two processes never advance one session together.
"""

from __future__ import annotations

import asyncio
import os
import signal
from typing import TYPE_CHECKING, Annotated, Optional

import typer
from rich.markup import escape

from chronicle.runtime.app.errors import NO_STORE, AppError
from chronicle.runtime.bounds import MAX_IDLE_EXIT_S, MAX_LEASE_S, MAX_POLL_S  # the library's bounds too (chronicle/arguments.py)
from chronicle.runtime.leases import DEFAULT_LEASE_S
from chronicle.runtime.self_repair import DEFAULT_STUCK_AFTER_S, DEFAULT_TOOL_FAILURES

from .common import (
    DbOption,
    JsonOption,
    WorkspaceOption,
    cli_errors,
    err_console,
    fail,
    finite_at_least,
    hint,
    log_line,
    missing_store,
    open_store,
    out_console,
    pasted,
    print_json,
    read_prompt,
    store_command,
)
from .lazy import lazy_module
from .limits import LimitFlags, limit_options
from .pipes import keep_going
from .render import HumanRenderer, JsonLinesRenderer, printable
from .repairs_cmd import FailuresOption, StuckOption
from .run_cmd import AgentsOption, AttachOption, MaxIterationsOption, ModelOption, ProviderOption, ToolsOption, from_environment, report

if TYPE_CHECKING:  # the use cases import the loop, pydantic and the providers; `--help` needs none of them
    from chronicle.runtime import live, loop
    from chronicle.runtime.app import approvals, loops, specs
    from chronicle.runtime.app import resume as resuming
    from chronicle.runtime.app import worker as working
    from chronicle.runtime.store import ChronicleStore
else:
    approvals = lazy_module("chronicle.runtime.app.approvals")
    loops = lazy_module("chronicle.runtime.app.loops")
    resuming = lazy_module("chronicle.runtime.app.resume")
    specs = lazy_module("chronicle.runtime.app.specs")
    working = lazy_module("chronicle.runtime.app.worker")
    live = lazy_module("chronicle.runtime.live")
    loop = lazy_module("chronicle.runtime.loop")

LeaseOption = Annotated[float, typer.Option(
    "--lease-s", callback=finite_at_least(0.5, MAX_LEASE_S, "a day"), help="Seconds a session stays claimed without renewal")]
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
    keep_going()  # a reader of stdout going away must not abandon a turn (cli/pipes.py)
    with cli_errors():
        if not session and not all_sessions:
            fail("name a SESSION to resume, or pass --all", 2)
        if model and not from_environment("model"):  # said, not silently dropped: a session runs on its recorded model
            err_console.print(f"note: --model ignored; a session runs on its recorded model: `{hint('model SESSION NAME', db)}` "
                              "records a change", highlight=False, soft_wrap=True)
        if not session and (missing := missing_store(db)) is not None:
            nothing(None, f"no Chronicle store at {missing} yet", as_json)
            return
        try:
            store = open_store(db, create=False)
        except AppError as exc:  # a PostgreSQL database or schema without a store: as a missing SQLite file
            if session or exc.kind != NO_STORE:
                raise
            nothing(None, str(exc).partition("; ")[0], as_json)
            return
        named = store.resolve_session_id(session) if session else None
        found = resuming.census(store, yes) if named is None else None
        for line in resuming.finish_owed_files(store, named, found.owing if found is not None else None):  # an interrupted undo/redo --files is finished before any turn runs
            err_console.print(f"note: {escape(printable(line))}", soft_wrap=True)
        overrides = working.Overrides(
            provider=specs.normalise_provider(provider), model=model,
            workspace=specs.resolve_workspace(workspace) if workspace else None, options=loop.LoopOptions(auto_approve=yes), limits=limits,
        )
        code, setup_failed = 0, False
        if named is not None:
            sid = named
            stalled = resuming.blocked(store, sid, yes)
            if isinstance(stalled, resuming.AwaitingApproval) and (why := resuming.cannot_go_on(store, stalled, overrides)):
                fail(why, 2)  # said before anyone approves: the approval would only lead to this refusal
            if isinstance(stalled, resuming.AwaitingApproval):
                if as_json:  # --json promises JSON on stdout, a pause included (exit 3 as in `run`)
                    print_json(stalled.row())
                else:
                    err_console.print(f"[yellow]paused:[/] {escape(stalled.message)}")
                raise typer.Exit(3)
            if stalled is not None:
                nothing(sid, stalled, as_json)
                return
            targets = [sid]
        else:
            assert found is not None
            targets, waiting = found.needing_work, []
            for stalled in found.paused:  # one that could not go on once approved says why instead
                if why := resuming.cannot_go_on(store, stalled, overrides):
                    err_console.print(f"[red]error:[/] {escape(why)}")
                    setup_failed = True
                else:
                    waiting.append(stalled)
            if not as_json:
                for stalled in waiting:
                    err_console.print(f"[yellow]paused:[/] {escape(stalled.message)}")
            if not targets:
                if waiting:  # not "nothing to resume": these go on once someone decides (exit 3, as for one session)
                    if as_json:
                        for stalled in waiting:
                            print_json(stalled.row())
                    raise typer.Exit(3)
                if setup_failed:
                    raise typer.Exit(2)
                nothing(None, "no session has a turn in flight or a queued input", as_json)
                return
        broker = live.Broker()
        broker.subscribe(JsonLinesRenderer() if as_json else HumanRenderer(name_inputs=True))
        holder = working.worker_name()
        for sid in targets:
            try:
                outcomes = asyncio.run(resuming.resume_one(store, sid, overrides, broker, holder, lease_s, yes, say=say_note))
            except loops.LoopSetupError as exc:
                # One session that cannot be resumed (its script or workspace is gone) must not
                # hold back the others: say why on one line and go on, as the worker does.
                if len(targets) == 1:
                    fail(str(exc), 2)
                err_console.print(f"[red]error:[/] {escape(str(exc))}")
                setup_failed = True
                continue
            if isinstance(outcomes, resuming.Busy):
                err_console.print(f"[yellow]busy:[/] {escape(outcomes.message)}")
                code = code or 1
                continue
            for outcome in outcomes:
                code = code or report(outcome, as_json, store.url)
        raise typer.Exit(code or (2 if setup_failed else 0))


def say_note(note: str) -> None:
    """A setup note of a session being resumed (an ignored setting, a tool no longer offered), as `run` prints its notes."""
    err_console.print(f"[dim]{escape(note)}[/]", soft_wrap=True)


def nothing(sid: object, message: str, as_json: bool) -> None:
    """Nothing to resume is an answer, not an error: exit 0, as JSON too when asked."""
    if as_json:
        print_json({"session_id": str(sid) if sid else None, "status": "nothing_to_resume", "message": message})
    else:
        out_console.print(f"nothing to resume: {message}", soft_wrap=True)


def approve(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix")],
    tool_call: Annotated[Optional[str], typer.Option("--tool-call", help="Only this tool call (id, id prefix or tool_use id)")] = None,
    always: Annotated[bool, typer.Option("--always", help="Also allow this tool without asking for the rest of the session")] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Approve tool calls of a paused turn (all of them unless --tool-call); then `resume` continues it."""
    with cli_errors():
        store = open_store(db, create=False)
        decided = approvals.approve(store, session, tool_call=tool_call, always=always)
        _decided(decided, "approved", as_json, store)


def deny(
    session: Annotated[str, typer.Argument(help="Session id or unique prefix")],
    tool_call: Annotated[Optional[str], typer.Option("--tool-call", help="Only this tool call (id, id prefix or tool_use id)")] = None,
    reason: Annotated[str, typer.Option("--reason", help="What the model is told")] = "denied by the user",
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Deny tool calls of a paused turn; the model reads the denial when `resume` continues the turn."""
    with cli_errors():
        store = open_store(db, create=False)
        decided = approvals.deny(store, session, tool_call=tool_call, reason=reason)
        _decided(decided, "denied", as_json, store)


def _decided(decided: approvals.Decided, verb: str, as_json: bool, store: ChronicleStore) -> None:
    """The decision (exit 0: it is recorded and valid), then how the turn goes on: `resume`, or, when `resume` here would
    refuse (a tool defined in the program that paused, a workspace gone), why, as `resume` says it."""
    sid = decided.session_id
    why = resuming.cannot_run_here(store, sid)
    if as_json:
        for row in decided.rows():
            print_json(row)
    else:
        from .render import short, whole_input

        for call in decided.calls:
            out_console.print(f"{verb} {escape(short(call.name))} ({call.id}):")
            out_console.print(escape(whole_input(call.input)), style="dim")
        if why is None:
            out_console.print(f"continue the turn with `{pasted(f'resume {sid}', store.url)}`", soft_wrap=True)
    if why is not None:
        err_console.print(f"[yellow]note:[/] {verb} and recorded, but `{escape(pasted(f'resume {sid}', store.url))}` cannot go on from "
                          f"here: {escape(why)}", soft_wrap=True, highlight=False)


@limit_options
def submit(
    prompt: Annotated[str, typer.Argument(help="What to ask the agent (`-`: read it from stdin)")],
    session: Annotated[Optional[str], typer.Option("--session", help="Queue on this session (id or unique prefix)")] = None,
    provider: ProviderOption = None,
    model: ModelOption = None,
    workspace: WorkspaceOption = None,
    max_iterations: MaxIterationsOption = None,
    agents: AgentsOption = None,
    tools: ToolsOption = None,
    attach: AttachOption = None,
    as_json: JsonOption = False,
    db: DbOption = None,
    limits: LimitFlags = LimitFlags(),
) -> None:
    """Record PROMPT durably for a worker to run, and print the session id.

    A new session is specified as `run` would specify it (flags, then the agents table of chronicle.toml) and checked the same way before anything is recorded."""
    with cli_errors():
        prompt = read_prompt(prompt)
        if not prompt.strip():
            fail("the prompt is empty; say what the agent should do", 2)
        if not session and missing_store(db) is not None:  # a bad flag on a first run leaves no empty store behind
            resuming.checked_spec(provider, model, specs.resolve_workspace(workspace), max_iterations, agents, None, tuple(tools or ()),
                                  limits)
        store = open_store(db)
        submitted = resuming.submit(store, prompt, session=session, provider=provider, model=model,
                                 workspace=workspace, max_iterations=max_iterations, agents=agents, tools=tuple(tools or ()),
                                 attachments=attach, limits=limits)
        if as_json:
            print_json(submitted.row())
        else:
            print(submitted.session_id)  # alone on stdout, for `sid=$(chronicle submit ...)`
            if err_console.is_terminal:
                sid = submitted.session_id
                err_console.print(f"[dim]queued for a worker: `{pasted('worker', store.url)}` runs it, or "
                                  f"`{pasted(f'resume {sid}', store.url)}` here and now[/]", soft_wrap=True)


@limit_options
def worker(
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Sessions advanced at once")] = 4,
    once: Annotated[bool, typer.Option("--once", help="Exit as soon as no session needs work")] = False,
    idle_exit: Annotated[Optional[float], typer.Option("--idle-exit", callback=finite_at_least(0, MAX_IDLE_EXIT_S, "a week"), help="Exit after this many idle seconds")] = None,
    poll: Annotated[float, typer.Option("--poll", callback=finite_at_least(0.05, MAX_POLL_S, "a day"), help="Seconds between looks for new work")] = 0.5,
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
    keep_going()  # a reader of stdout going away must not abandon a turn (cli/pipes.py)
    from chronicle.runtime.stack_dumps import dump_stacks_on_signal

    dump_stacks_on_signal()  # `kill -USR1 PID`: every thread's stack on stderr, for a worker that seems stuck
    with store_command(db) as store:
        overrides = working.Overrides(
            provider=specs.normalise_provider(provider), model=model,
            workspace=specs.resolve_workspace(workspace) if workspace else None, options=loop.LoopOptions(auto_approve=yes), limits=limits,
        )
        w = working.compose_worker(
            store, overrides, working.WorkerOptions(concurrency, poll, lease_s, idle_exit, once),
            log=log_line, stuck_after_s=stuck_after, tool_failures=tool_failures,
            say=lambda note: err_console.print(f"[dim]{escape(note)}[/]", soft_wrap=True))

        async def main() -> int:
            event_loop = asyncio.get_running_loop()
            signals = {"count": 0}

            def on_signal() -> None:
                signals["count"] += 1
                if signals["count"] > 1:  # at once: no turn ends, but no command it started outlives it either
                    w.abandon("stopped at once by a second signal")
                    os._exit(143)
                w.drain()

            for sig in (signal.SIGINT, signal.SIGTERM):
                try:
                    event_loop.add_signal_handler(sig, on_signal)
                except (NotImplementedError, RuntimeError):
                    pass
            return await w.run()

        raise typer.Exit(asyncio.run(main()))
