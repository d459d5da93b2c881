"""Slash commands of `chronicle chat`: each acts on the recorded session, never on screen state."""

from __future__ import annotations

import asyncio
from typing import Any, Callable

from rich.markup import escape
from rich.table import Table

from chronicle.domain.errors import DomainError
from chronicle.runtime.app import AppError, queries
from chronicle.runtime.app import controls as app_controls
from chronicle.runtime.app import timetravel as app_timetravel
from chronicle.runtime.store import NotFound

from .common import pasted
from .render import UNPRICED, printable, usd

HELP = [
    ("/undo [N] [--files]", "take the last N turns (default 1) off the branch; the log keeps them; --files puts their files back"),
    ("/redo [--files]", "put the last undone turns back; --files re-applies the files they wrote"),
    ("/fork [TURN]", "continue in a new session that shares this one's history (up to turn TURN, as `fork --at`; default: all of it)"),
    ("/new", "start a new thread: a new session of this agent with an empty history (this one stays)"),
    ("/thread [ID]", "switch to another thread: a session of this agent (id or unique prefix); without ID, name this one"),
    ("/compact [N]", "summarise older turns, keeping the N most recent (default from settings)"),
    ("/suggest", "how full the model's context is, and what compaction would do now (nothing, summarise or truncate)"),
    ("/resume [ID]", "continue a turn left in flight (a crash, a killed chat) and run inputs still queued: this thread's, or ID's (switching to it)"),
    ("/cost", "tokens and USD spent by this session"),
    ("/why [CALL]", "why the agent made its last tool call (or CALL: a tool_use id or a tool's name): asked, saw, decided, did"),
    ("/tools", "the tools the agent may call"),
    ("/skills [search WORDS]", "the skills recorded for this session (inline ones are in the system prompt); with search, "
                               "those whose name or description has every word"),
    ("/progress", "the running (or last) turn: iterations, tokens, tools run, time"),
    ("/job PROMPT", "hand PROMPT to a worker as a background job (its own session); /jobs (or /list) lists them, /cancel ID cancels one"),
    ("/status", "session, model, branch, queue and limits"),
    ("/model [NAME] [--thinking N]", "the model this session runs on; with NAME (or --thinking) change it from the next turn, recorded"),
    ("/stop, /interrupt", "cancel the running turn (typed while it runs; Ctrl-C too), recorded as a cancel with who asked"),
    ("/heartbeat", "run the workspace's heartbeat routine now (a \\[routines.NAME] table with heartbeat = true in chronicle.toml)"),
    ("/summary", "the session's title and its compaction summary, if it has them"),
    ("/notes [TURN]", "the shared notes this session's agents left each other (write_note), as last written, or as they "
                      "stood when turn TURN ended"),
    ("/clear", "same as /new: a new empty thread; nothing is erased (the log keeps every turn)"),
    ("/version", "the installed Chronicle version"),
    ("/ping", "check that the event store answers, and how fast"),
    ("/help", "this list"),
    ("/quit, /exit, /shutdown", "leave (the session stays; continue with --session)"),
]


def handle(chat: Any, line: str) -> str | None:
    name, _, arg = line.partition(" ")
    command = COMMANDS.get(name.lower())
    if command is None:
        chat.console.print(f"[red]unknown command {escape(name)}[/]; /help lists them")
        return None
    try:
        return command(chat, arg.strip())
    except (DomainError, AppError, NotFound) as exc:  # an unknown id typed after a command is that command's error
        chat.console.print(f"[red]error:[/] {escape(printable(str(exc)))}")
        return None


def _count(arg: str, default: int | None) -> int | None:
    if not arg:
        return default
    if not arg.isdigit():
        raise DomainError(f"expected a whole number (0 or more), got {arg!r}")
    return int(arg)


def _files_flag(arg: str) -> tuple[str, bool]:
    """`/undo 2 --files` → ("2", True): the rest of the argument and whether --files was given."""
    words = arg.split()
    return " ".join(w for w in words if w != "--files"), "--files" in words


def _print_files(chat: Any, rows: list[dict[str, str]] | None) -> None:
    for item in rows or []:
        chat.console.print(f"  {item['action']}: {escape(printable(item['path']))}")  # a name the model chose


def undo(chat: Any, arg: str) -> None:
    count, files = _files_flag(arg)
    undone = app_timetravel.undo(chat.store, chat.session_id, _count(count, 1) or 1, files=files)
    inputs = ", ".join(repr(text[:40]) for text in undone.inputs)
    chat.console.print(f"undid {len(undone.turn_ids)} turn(s): {escape(printable(inputs))}")
    _print_files(chat, undone.files)


def redo(chat: Any, arg: str) -> None:
    rest, files = _files_flag(arg)
    if rest:
        raise DomainError(f"/redo takes only --files, got {rest!r}")
    redone = app_timetravel.redo(chat.store, chat.session_id, files=files)
    chat.console.print(f"redid {len(redone.turn_ids)} turn(s)")
    _print_files(chat, redone.files)
    if redone.warning:
        chat.console.print(f"[yellow]warning:[/] {escape(printable(redone.warning))}")


def fork(chat: Any, arg: str) -> None:
    parent = chat.session_id
    child = app_timetravel.fork(chat.store, parent, _count(arg, None))
    chat.conversation.switch(child.id)
    chat.console.print(f"forked session {parent} → {child.id} ({len(child.head)} turn(s) shared); now chatting in the fork", soft_wrap=True)
    chat.console.print(f"new session {child.id}; open it later with `{pasted(f'chat --session {child.id}', chat.store.url)}`",
                       soft_wrap=True)


def new_thread(chat: Any, arg: str) -> None:
    """/new, /thread new and /clear (a session is our thread: clearing starts an empty one, erasing nothing)."""
    if arg and arg != "new":
        raise DomainError("/new takes nothing; /thread ID switches to another thread")
    before = chat.session_id
    sid = chat.conversation.new_thread()
    chat.console.print(f"new thread: session {sid} (the last one, {before}, stays; /thread {str(before)[:8]} goes back)", soft_wrap=True)


def thread(chat: Any, arg: str) -> None:
    if not arg:
        chat.console.print(f"this thread is session {chat.session_id}; /thread ID switches, /new starts one", soft_wrap=True)
        return
    if arg == "new":
        new_thread(chat, "")
        return
    sid = chat.conversation.switch_thread(arg)
    turns = len(chat.store.session(sid).head)
    chat.console.print(f"switched to thread {sid} ({turns} turn(s) on its branch)", soft_wrap=True)


def compact(chat: Any, arg: str) -> None:
    keep = _count(arg, chat.settings.compaction.keep_recent)
    result = asyncio.run(app_controls.compact(chat.store, chat.session_id, "summary", keep, loop=chat.loop))
    if result.ok:
        chat.console.print(f"compacted {result.turns_compacted} turn(s); the model now reads a summary of them")
    else:
        chat.console.print(f"[yellow]not compacted:[/] {escape(result.reason)}")


def suggest(chat: Any, arg: str) -> None:
    """Seed 001's /suggest: the context monitor's reading of the next request, the one automatic compaction makes
    before a turn starts (runtime/compaction.py), said rather than done."""
    from chronicle.runtime.compaction import Compactor

    if arg:
        raise DomainError("/suggest takes nothing")
    settings = chat.settings.compaction
    compactor = chat.loop.compactor or Compactor(settings)
    session = chat.store.session(chat.session_id)
    model = session.current_model or session.spec.model
    tokens = compactor.estimate(chat.loop.io, session)
    window = compactor.monitor.window(model)
    strategy = compactor.monitor.suggest(tokens, model)
    chat.console.print(f"context: about {tokens:,} tokens of {model or 'the model'}'s {window:,} ({tokens / window:.0%}); "
                       f"compaction summarises from {settings.threshold:.0%} and truncates from {settings.critical:.0%}",
                       soft_wrap=True)
    auto = "automatic compaction does it before the next turn" if settings.auto else "automatic compaction is off"
    if strategy is None:
        chat.console.print("nothing to do yet" + ("" if settings.auto else f" ({auto}; /compact summarises when you choose)"))
    elif strategy == "summary":
        chat.console.print(f"suggested: summarise the older turns, keeping {settings.keep_recent} ({auto}; /compact does it now)")
    else:
        chat.console.print(f"suggested: truncate, the context is nearly full: the oldest turns are dropped without a summary "
                           f"({auto}; /compact summarises instead, if there is room for the summary call)", soft_wrap=True)


def resume(chat: Any, arg: str) -> None:
    """Seed 001's /resume: continue what this thread (or thread ID) left unfinished, as `chronicle resume SESSION`.
    A turn in flight is one a crash or a killed chat left; its finished tool calls are not run again."""
    if arg:
        thread(chat, arg)
    session = chat.store.session(chat.session_id)
    if session.active_turn_id is None and session.next_input is None:
        chat.console.print(f"nothing to resume in session {chat.session_id}: no turn in flight and no queued input",
                           soft_wrap=True)
        return
    driven = asyncio.run(chat._drive())
    if driven.queued is not None:
        chat.console.print(f"[yellow]not resumed[/]: {escape(driven.queued.reason)}", soft_wrap=True)
        return
    chat.report(driven.outcome)


def cost(chat: Any, arg: str) -> None:
    """The session's total as `chronicle cost` reports it (the cost projection, sub-agents included)."""
    total = queries.session_total(chat.store, chat.session_id)
    # Money as `cost` and `sessions` print it (render.usd); a line, not a table, so the unpriced case says why inline.
    value = total.get("usd")
    figure = usd(value) if value is not None else (
        f"{UNPRICED} ({total.get('unpriced_calls', 0)} call(s) of models with no known price; "
        f"`{pasted(f'cost {chat.session_id} --by model', chat.store.url)}` names them)")
    chat.console.print(
        f"cost: {figure} — {total.get('calls', 0)} model call(s), {total.get('input_tokens', 0)} input / "
        f"{total.get('output_tokens', 0)} output tokens (this session and its sub-agents)"
    )


def tools(chat: Any, arg: str) -> None:
    session = chat.store.session(chat.session_id)
    table = Table("tool", "flags", "description")
    for tool in chat.loop.toolbox.tools.values():
        flags = [name for name, on in tool.flags().items() if on]
        if tool.name in session.always_allowed:
            flags.append("always allowed")
        table.add_row(escape(tool.name), ", ".join(flags), escape(printable(tool.description)))
    chat.console.print(table)


def skills(chat: Any, arg: str) -> None:
    recorded = chat.store.session(chat.session_id).spec.skills
    if not recorded:
        chat.console.print("no skills: add skills/NAME/SKILL.md to the workspace (or \\[skills] dirs in chronicle.toml)")
        return
    verb, _, words = arg.partition(" ")
    if verb and verb != "search":
        raise DomainError(f"/skills takes nothing or `search WORDS`, got {arg!r}")
    if verb == "search":
        if not words.strip():
            raise DomainError("/skills search needs words to look for, e.g. /skills search pdf")
        wanted = words.casefold().split()
        recorded = tuple(s for s in recorded if all(w in f"{s.name} {s.description}".casefold() for w in wanted))
        if not recorded:
            chat.console.print(f"no skill's name or description has {escape(words.strip())!r}; /skills lists them all")
            return
    table = Table("skill", "mode", "description", "sha256")
    for skill in recorded:
        table.add_row(escape(skill.name), skill.mode, escape(skill.description), skill.sha256[:12])
    chat.console.print(table)


def progress(chat: Any, arg: str) -> None:
    from chronicle.runtime.progress import progress_of

    session = chat.store.session(chat.session_id)
    turn_id = session.active_turn_id or (session.turns[-1] if session.turns else None)
    if turn_id is None:
        chat.console.print("no turn yet")
        return
    p = progress_of(chat.store.turn(turn_id), session.spec.max_iterations, status_of=lambda i: chat.store.tool_call(i).status)
    chat.console.print(
        f"turn {p['turn']} {p['status']}: {p['iteration']}/{p['max_iterations']} model call(s), "
        f"{p['input_tokens']} input / {p['output_tokens']} output tokens, {p['tools_run']} tool call(s) run"
        f"{f', {s} skipped' if (s := p['tools_skipped']) else ''}, {p['elapsed_s'] or 0:.1f} s"
    )


# /job, /jobs and /cancel are the use cases of `chronicle jobs` (runtime/app/jobs.py), printed for the chat.


def job(chat: Any, arg: str) -> None:
    from chronicle.runtime.app import jobs

    created = jobs.submit_beside(chat.store, chat.session_id, arg, origin="chat")
    chat.console.print(f"job {created['job_id']} queued; a `chronicle worker` runs it (/jobs to follow it)", soft_wrap=True)


def list_jobs(chat: Any, arg: str) -> None:
    from chronicle.runtime.app import jobs

    rows = jobs.listing(chat.store)
    if not rows:
        chat.console.print("no jobs")
    for row in rows:
        chat.console.print(f"{row['job_id'][:8]}  {row['status']:<12} {escape(row['prompt'][:80])}")


def cancel_job(chat: Any, arg: str) -> None:
    from chronicle.runtime.app import jobs

    if not arg:
        raise DomainError("which job? /cancel ID (see /jobs)")
    cancelled = jobs.cancel(chat.store, arg)  # an unknown id or a session that is no job: NotFound, this command's error
    chat.console.print(f"job {cancelled['job_id']} cancelled")


def why(chat: Any, arg: str) -> None:
    """`chronicle why SESSION [CALL]` for this session, printed as the command prints it."""
    from chronicle.runtime.app.why import why as explain

    from .why_cmd import show

    show(explain(chat.store, chat.session_id, arg or None), chat.console, chat.store.url)


def status(chat: Any, arg: str) -> None:
    session = chat.store.session(chat.session_id)
    summary, view = session.context_view()
    spec = session.spec
    lines = [
        f"session {session.id}  agent {spec.name}  model {spec.model}"
        + ("" if spec.thinking_tokens is None else f" (thinking {spec.thinking_tokens or 'off'})"),
        f"status {session.status}  turns on branch {len(session.head)}  queued {len(session.queue)}  redo {len(session.redo_stack)}",
        f"context: {len(view)} turn(s)" + (f" + a summary of {len(session.head) - len(view)}" if summary is not None else ""),
        "limits: " + ", ".join(f"{k}={v}" for k, v in chat.settings.describe().items() if v is not None),
    ]
    if session.forked_from:
        lines.append(f"forked from {session.forked_from['session_id']}")
    chat.console.print("\n".join(escape(line) for line in lines))


def model(chat: Any, arg: str) -> None:
    """`chronicle model SESSION [NAME] [--thinking N]`, for this session (app/model_change.py)."""
    from chronicle.runtime.app import model_change

    words = arg.split()
    thinking: int | None = None
    if "--thinking" in words:
        at = words.index("--thinking")
        value = words[at + 1] if at + 1 < len(words) else ""
        if not value.isdigit():
            raise DomainError(f"--thinking takes a whole number of tokens (0: off), got {value!r}")
        thinking, words = int(value), words[:at] + words[at + 2:]
    if len(words) > 1:
        raise DomainError("/model takes one model name (and --thinking N)")
    name = words[0] if words else None
    if name is None and thinking is None:
        choice = model_change.current(chat.store, chat.session_id)
    else:
        choice = model_change.change_model(chat.store, chat.session_id, name, thinking)
    chat.console.print(escape(printable(choice.line())), soft_wrap=True)


def stop(chat: Any, arg: str) -> None:
    """At the prompt this chat runs no turn; another process (a worker, a `run`) may run one of this session:
    that one is cancelled as `chronicle cancel` cancels it. The wait is short and wakes as soon as that
    process records the end (runtime/controls.py, TurnEndWait); past it chat says so and gives the prompt
    back, the request standing, rather than hold the person at a prompt that does not answer."""
    result = app_controls.cancel(chat.store, chat.session_id, wait_s=STOP_WAIT_S, reason=STOP_REASON)
    if result.status == "idle":
        chat.console.print("nothing is running (type /stop while a turn runs, or press Ctrl-C)")
        return
    if result.status == "requested":
        chat.console.print(
            f"[yellow]not stopped yet:[/] turn {result.turn_id} is run by {escape(_runner(chat))}, which has not "
            f"stopped it within {STOP_WAIT_S:g} s; the cancel request stands and that process honours it at its next "
            f"check (if it died, `{pasted(f'resume {chat.session_id}', chat.store.url)}` does). /status shows when it has",
            soft_wrap=True)
        return
    chat.console.print(f"turn {result.turn_id}: {result.status}", soft_wrap=True)


#: How long /stop at the prompt waits for another process to stop its turn (it polls every 0.25 s).
STOP_WAIT_S = 2.0


def _runner(chat: Any) -> str:
    """Who runs the session's turn, as its lease names it (`host:pid:nonce`), for the person to find it."""
    from chronicle.runtime.leases import current_lease

    try:
        lease = current_lease(chat.store, chat.session_id)
    except Exception:  # noqa: BLE001 - only a name for the message
        lease = None
    holder = getattr(lease, "holder", None)
    return f"process {holder}" if holder else "another process"


#: The reason a /stop records (the turn's Cancelled event and the CancelRequested before it say it).
STOP_REASON = "stopped with /stop in chat"


def stop_running(chat: Any) -> None:
    """/stop typed while this chat's turn runs: record the cancel request (with who asked); the running loop's
    cancel watch reads it and cancels the turn, as for `chronicle cancel` from another terminal."""
    result = app_controls.cancel(chat.store, chat.session_id, wait_s=0.0, reason=STOP_REASON)
    if result.status == "idle":
        chat.console.print("[yellow]↪ not stopped:[/] the turn has ended")
        return
    chat.console.print("[yellow]↪ stopping the running turn[/]")


def heartbeat(chat: Any, arg: str) -> None:
    """The workspace's heartbeat routine, fired now with its guardrails (`routines run NAME`)."""
    from pathlib import Path

    from chronicle.runtime.app import routines as routine_cases
    from chronicle.runtime.routines import RoutineError

    spec = chat.store.session(chat.session_id).spec
    workspace = Path(spec.workspace or ".")
    try:
        beats = [r for r in routine_cases.routines_of(workspace) if r.heartbeat]
    except RoutineError as exc:
        raise AppError(str(exc), 2) from None
    if not beats:
        chat.console.print(f"no heartbeat routine in {escape(str(workspace / 'chronicle.toml'))}: add \\[routines.heartbeat] with "
                           "heartbeat = true, and the checklist in HEARTBEAT.md", soft_wrap=True)
        return
    row = asyncio.run(routine_cases.run(chat.store, workspace, beats[0], provider=spec.provider or None,
                                        auto_approve=chat.loop.options.auto_approve))
    said = row.get("summary") or row.get("reason") or ""
    chat.console.print(f"heartbeat {escape(beats[0].name)}: {row['status']} (session {row.get('session_id')})"
                       + (f": {escape(printable(str(said)))}" if said else ""), soft_wrap=True)


def summary(chat: Any, arg: str) -> None:
    session = chat.store.session(chat.session_id)
    summary_text = session.context_view()[0]  # the summary the model reads, as `history` shows it
    if session.title:
        chat.console.print(f"title: {escape(printable(session.title))}")
    if summary_text:
        chat.console.print(escape(printable(summary_text)))
    if not session.title and not summary_text:
        chat.console.print("no title or summary yet: a title is made after the first turn; /compact summarises older turns")
    elif not summary_text:
        chat.console.print("[dim](no summary yet: /compact summarises older turns)[/]")


def notes(chat: Any, arg: str) -> None:
    """`chronicle notes SESSION [--at TURN]` in chat (runtime/app/notes.py: TURN counted and refused as /fork's)."""
    from chronicle.runtime.app.notes import notes_of

    at = _count(arg, None)
    rows = notes_of(chat.store, chat.session_id, at)
    if not rows:
        chat.console.print(f"no notes when turn {at} ended" if at is not None else
                           "no notes yet: an agent whose tools include write_note leaves them (see `chronicle notes --help`)")
        return
    for row in rows:
        chat.console.print(f"[bold]{escape(row['name'])}[/] [dim]{row['written_at'][:19].replace('T', ' ')}, "
                           f"session {row['session_id'][:8]}[/]")
        chat.console.print(escape(printable(row["text"])), soft_wrap=True)


def version(chat: Any, arg: str) -> None:
    from .entry import version_text

    chat.console.print(version_text())


def ping(chat: Any, arg: str) -> None:
    from time import perf_counter

    started = perf_counter()
    chat.store.max_position()
    chat.console.print(f"pong: the store ({chat.store.backend}) answered in {(perf_counter() - started) * 1000:.1f} ms")


def show_help(chat: Any, arg: str) -> None:
    for name, text in HELP:
        chat.console.print(f"  [bold]{escape(name)}[/]  {text}")


def quit_chat(chat: Any, arg: str) -> str:
    return "quit"


COMMANDS: dict[str, Callable[[Any, str], str | None]] = {
    "/undo": undo, "/redo": redo, "/fork": fork, "/new": new_thread, "/thread": thread,
    "/compact": compact, "/cost": cost, "/why": why, "/tools": tools, "/skills": skills, "/progress": progress,
    "/job": job, "/jobs": list_jobs, "/list": list_jobs, "/cancel": cancel_job,
    "/status": status, "/model": model, "/stop": stop, "/interrupt": stop, "/heartbeat": heartbeat,
    "/summary": summary, "/summarize": summary, "/notes": notes, "/clear": new_thread, "/version": version, "/ping": ping,
    "/help": show_help, "/?": show_help, "/quit": quit_chat, "/exit": quit_chat, "/shutdown": quit_chat,
    "/suggest": suggest, "/resume": resume,
}

#: Typed while a turn runs (chat_cmd.Chat.steer): these act on that turn; other slash commands wait for the prompt.
WHILE_RUNNING = {"/stop": stop_running, "/interrupt": stop_running}
