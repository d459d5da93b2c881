"""Resume and submit: continue sessions found in flight, record inputs for a worker to run.

Both go through the session's lease and the one loop factory, like every other way of running
turns; a session whose lease a live process holds is left alone and the holder is named.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence
from uuid import UUID

from chronicle.domain.agent_spec import DEFAULT_PREFIX, AgentSpec
from chronicle.domain.tool_call import ToolCall

from ..agents.registry import AgentRegistry
from ..import_paths import using
from ..leases import DEFAULT_LEASE_S, current_lease
from ..live import AgentEnd, AgentStart, Broker
from ..loop import TurnOutcome
from ..pasteable import pasteable
from ..session_work import FILES_OWED, needs_work, pending_approvals, waiting_for_person
from ..sessions import start_session, submit_input
from ..settings import LimitFlags, SettingsError, load_settings
from ..store import ChronicleStore
from .errors import AppError
from .loops import LoopSetupError, loop_parts, refuse_vanished_tools
from .queries import session_id
from .running import stored_attachments
from .specs import new_spec, normalise_provider, resolve_workspace
from .worker import Overrides, advance_session, cancelled_before_start, loop_for_session, objects_of, owed_files_finished


@dataclass(frozen=True)
class Busy:
    """Another live process holds the session; it is left alone."""

    session_id: UUID
    holder: str
    until: str

    @property
    def message(self) -> str:
        return f"session {self.session_id} is being advanced by {self.holder} (lease until {self.until}); try again later"


def busy(store: ChronicleStore, sid: UUID) -> Busy:
    lease = current_lease(store, sid)
    until = lease.expires_at.isoformat() if lease and lease.expires_at else "?"
    return Busy(sid, lease.holder if lease and lease.holder else "another process", until)


@dataclass(frozen=True)
class AwaitingApproval:
    """Nothing can run: the paused turn still waits for a person's decision on these calls."""

    session_id: UUID
    calls: list[ToolCall]
    #: The store's URL, for the approve and deny the message suggests (runtime/pasteable.py).
    store_url: str | None = None

    @property
    def message(self) -> str:
        names = ", ".join(sorted({c.name for c in self.calls}))
        sid, url = self.session_id, self.store_url
        return (f"session {sid} awaits approval of {names}: `{pasteable(f'approve {sid}', url)}` or "
                f"`{pasteable(f'deny {sid}', url)}` first, or resume with --yes")

    def row(self) -> dict[str, Any]:
        """`resume --json`'s object for a pause (exit 3, as `run` exits on one)."""
        return {"session_id": str(self.session_id), "status": "awaiting_approval",
                "tool_calls": [{"tool_call_id": str(c.id), "name": c.name} for c in self.calls], "message": self.message}


def finish_owed_files(store: ChronicleStore, sid: UUID | None = None, owing: list[UUID] | None = None) -> list[str]:
    """Finish the file writes an interrupted undo/redo --files owes (of `sid`, of `owing` as a `Census` found them, or
    of every session), before anything else runs: one line each saying what was done, and which files were refused
    (changed since)."""
    from ..files_owed import sessions_owing

    owed = [sid] if sid is not None else owing if owing is not None else sessions_owing(store)
    return [line for line in (owed_files_finished(store, s) for s in owed) if line is not None]


@dataclass
class Census:
    """What `resume --all` must do, from one read of every session (it was three: each a read of every
    session, ≈ 0.4 s apiece at 3,000 sessions on SQLite): the sessions owing file writes, the top-level
    ones with work (oldest first), and those whose turn waits for a person."""

    owing: list[UUID]
    needing_work: list[UUID]
    paused: list[AwaitingApproval]


def census(store: ChronicleStore, auto_approve: bool = False) -> Census:
    """Finishing owed files changes none of the other two answers (FilesRestored/FilesReapplied start or
    end no turn), so they are read in the same pass, before the files are written."""
    found = Census([], [], [])
    for session in store.sessions():
        if getattr(session, "files_owed", None):
            found.owing.append(session.id)
        if session.parent_session_id is not None:
            continue
        if needs_work(store, session, auto_approve) not in (None, FILES_OWED) and cancelled_before_start(store, session) is None:
            found.needing_work.append(session.id)  # the files owed alone are finished before any session is resumed
        if not auto_approve and session.active_turn_id is not None and (waiting := waiting_for_person(store, session)):
            found.paused.append(AwaitingApproval(session.id, waiting, store.url))
    return found


def cannot_go_on(store: ChronicleStore, paused: AwaitingApproval, overrides: Overrides) -> str | None:
    """Why a session paused for approval could not go on once the calls are decided (a tool its history called no
    longer loads, its workspace is gone, no provider), or None: checked as building its loop checks, so `resume` says
    it before anyone approves, rather than after (the approval recorded, then the refusal). Nothing is recorded."""
    why = cannot_run_here(store, paused.session_id, overrides)
    if why is None:
        return None
    names = ", ".join(sorted({c.name for c in paused.calls}))
    return f"{why} (it awaits approval of {names}, but neither approving nor denying lets it go on until then)"


def cannot_run_here(store: ChronicleStore, sid: UUID, overrides: Overrides | None = None) -> str | None:
    """Why `resume` in this process would refuse to build `sid`'s loop (a tool its history called no longer loads,
    its workspace is gone, no provider), or None. `approve`/`deny` ask it once the decision is recorded, so they do not
    send a person to a `resume` that would refuse. Nothing is recorded."""
    overrides = overrides or Overrides()
    session = store.session(sid)
    with using(objects_of(store, session.id)):
        try:
            parts = loop_parts(session.spec, session=session, provider_name=overrides.provider, model=overrides.model,
                               workspace=overrides.workspace, limits=overrides.limits)
            refuse_vanished_tools(store, session, parts.toolbox, parts.workspace)
        except LoopSetupError as exc:
            return str(exc)
    return None


def blocked(store: ChronicleStore, sid: UUID, auto_approve: bool = False) -> AwaitingApproval | str | None:
    """Why resuming `sid` would run nothing: a pause for approval, or a line saying there is no
    work; None when there is work. `chronicle resume SESSION` and the library's resume both ask."""
    record = store.session(sid)
    never_started = cancelled_before_start(store, record)
    if never_started is not None:
        return never_started
    if needs_work(store, record, auto_approve) is not None:
        return None
    waiting = pending_approvals(store, record)
    if waiting:
        return AwaitingApproval(sid, waiting, store.url)
    return f"session {sid} has no turn in flight and no queued input"


async def resume_one(store: ChronicleStore, sid: UUID, overrides: Overrides, broker: Broker, holder: str,
                     lease_s: float = DEFAULT_LEASE_S, auto_approve: bool = False,
                     say: Callable[[str], Any] | None = None) -> list[TurnOutcome] | Busy:
    """Advance one session under its lease, with agent_start/agent_end around it as `run` emits them.

    The loop is built before agent_start, so a session that cannot be resumed raises
    LoopSetupError without a dangling start event; `say` hears its setup notes before anything runs."""
    with using(objects_of(store, sid)):  # the objects of the Agent it was run with here, if it still lives
        return await _resume_one(store, sid, overrides, broker, holder, lease_s, auto_approve, say)


async def _resume_one(store: ChronicleStore, sid: UUID, overrides: Overrides, broker: Broker, holder: str,
                      lease_s: float, auto_approve: bool, say: Callable[[str], Any] | None) -> list[TurnOutcome] | Busy:
    record = store.session(sid)
    spec = record.spec
    links = {
        "parent_session_id": str(record.parent_session_id) if record.parent_session_id else None,
        "parent_tool_call_id": str(record.parent_tool_call_id) if record.parent_tool_call_id else None,
        "depth": spec.depth,
    }
    loop = loop_for_session(store, record, overrides, broker, say=say)
    await broker.emit(AgentStart(session_id=str(sid), agent=spec.name, instance=spec.instance or None, prefix=spec.prefix or DEFAULT_PREFIX, **links))
    outcomes = await advance_session(store, sid, lambda s: loop, holder, lease_s, auto_approve=auto_approve, say=say)
    reason: str | None
    if outcomes is None:
        held = busy(store, sid)
        status, reason = "busy", held.message
    elif outcomes:
        status, reason = outcomes[-1].status, outcomes[-1].reason
    else:
        status, reason = "idle", None
    await broker.emit(AgentEnd(session_id=str(sid), agent=spec.name, instance=spec.instance or None, status=status, reason=reason, **links))
    return held if outcomes is None else outcomes


@dataclass(frozen=True)
class Submitted:
    session_id: UUID
    input_id: str

    def row(self) -> dict[str, Any]:
        """`submit --json`, POST /sessions and the library's submit: one shape."""
        return {"session_id": str(self.session_id), "input_id": self.input_id}


def submit(store: ChronicleStore, prompt: str, session: str | UUID | None = None, provider: str | None = None,
           model: str | None = None, workspace: Path | None = None, max_iterations: int | None = None,
           agents: Path | None = None, registry: AgentRegistry | None = None, tools: tuple[str, ...] = (),
           attachments: Sequence[Any] | None = None, origin: dict[str, Any] | None = None,
           limits: LimitFlags | None = None) -> Submitted:
    """Record PROMPT durably for a worker: on `session`, or on a new session specified as `run` would.

    A worker runs it later, elsewhere: an unknown provider, a missing script or a bad chronicle.toml
    found then would leave an input nobody can run, so they are refused now (exit 2), before recording.
    `origin`: {"channel", "senders"} when a channel queued the input (runtime/server/channels.py)."""
    if not prompt.strip():
        raise AppError("the prompt is empty; say what the agent should do", 2)
    if session:
        if provider or model or workspace or tools or (limits is not None and limits != LimitFlags()):
            raise AppError("--provider/--model/--workspace/--tools and the limit flags apply to new sessions; a session keeps "
                           "what it recorded", 2)
        sid = session_id(store, session)
        return Submitted(sid, submit_input(store, sid, prompt, attachments=stored_attachments(store, attachments), origin=origin))
    spec = checked_spec(provider, model, resolve_workspace(workspace), max_iterations, agents, registry, tools, limits)
    created, input_id = start_session(store, spec, prompt, attachments=stored_attachments(store, attachments), origin=origin)
    assert input_id is not None
    return Submitted(created.id, input_id)


def checked_spec(provider: str | None, model: str | None, workspace: Path, max_iterations: int | None = None,
                 agents: Path | None = None, registry: AgentRegistry | None = None, tools: tuple[str, ...] = (),
                 limits: LimitFlags | None = None) -> AgentSpec:
    """The spec `run` would record, checked as `run` checks it before anything is recorded; no store is
    needed, so a command can check it before it opens (and so creates) one. `limits`: the limit flags, recorded
    with the spec as `run` records them (a worker then runs the session under them)."""
    spec = new_spec(workspace, normalise_provider(provider), model, max_iterations, agents, registry=registry, extra_tools=tools)
    if not spec.provider:
        raise AppError("no model provider: set ANTHROPIC_API_KEY to use Claude, or give the scripted provider for an offline "
                       'run: --provider scripted:PATH (in Python, Agent(provider="scripted:PATH"))', 2)
    try:
        settings = load_settings(limits or LimitFlags(), workspace, in_code=spec.limits, compaction=spec.compaction)
        loop_parts(spec, provider_name=spec.provider, model=model, workspace=workspace, settings=settings)
    except SettingsError as exc:
        raise AppError(str(exc), 2) from None
    except LoopSetupError as exc:
        raise AppError(str(exc), 2) from None
    return spec.model_copy(update={"limits": settings.limits()})
