"""Start or continue a session and run its turns in this process: `run`, `chat`, `demo` and the API.

A process that runs turns holds the session's lease while it does, exactly as a worker does, so
`resume` and `worker` leave a live `run` or `chat` alone (and name the process holding it). An
input that arrives while another live process holds the session is queued for that process,
which drains the queue before it lets go. A holder that died is detected — its lease ran out, or
it was a process of this machine that no longer exists — and its turn in flight is continued
here, recorded as interrupted first, as `resume` would.
"""

from __future__ import annotations

import asyncio
import signal
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence
from uuid import UUID

from chronicle.domain.agent_spec import DEFAULT_PREFIX, AgentSpec

from ..agents.registry import AgentRegistry
from ..attachments import AttachmentError, checked_attachments, store_attachments
from ..environment import EnvironmentSettingError, environment
from ..leases import DEFAULT_LEASE_S, current_lease, holder_name, leased
from ..live import AgentEnd, AgentStart, Broker
from ..loop import AgentLoop, LoopOptions, TurnOutcome
from ..pasteable import pasteable
from ..retry import RetryPolicy, RetrySettingError
from ..sessions import start_session, submit_input
from ..settings import LimitFlags, Settings, SettingsError, load_settings
from ..store import ChronicleStore, ForgottenSession, NotFound
from ..turn_messages import turn_messages_cache
from .errors import AppError
from .loops import LoopSetupError, build_loop, loop_parts, refuse_vanished_tools
from .model_change import change_model, check_model
from .queries import session_id
from .specs import ignored_in_code, new_spec, resolve_workspace, session_workspace
from .worker import cancelled_before_start


@dataclass
class RunOptions:
    """What a client may choose for the turns it runs; None means the recorded value or the default."""

    provider: str | None = None
    model: str | None = None
    workspace: Path | None = None
    max_iterations: int | None = None
    #: A registry file for a new session (default: chronicle.toml in the workspace).
    agents: Path | None = None
    auto_approve: bool = False
    max_attempts: int | None = None
    limits: LimitFlags = field(default_factory=LimitFlags)
    #: A person answers approvals and doom-loop questions (chat).
    interactive: bool = False
    lease_s: float = DEFAULT_LEASE_S
    #: Output tokens per model call (default: CHRONICLE_MAX_TOKENS, else 8192).
    max_tokens: int | None = None
    #: A new session's agents given in code (the public API's Agent) instead of a registry file.
    registry: AgentRegistry | None = None
    #: The user's own tools by import path, added to a new session's main agent (`--tools`).
    tools: tuple[str, ...] = ()
    #: Who asks (recorded on a model change of a continued session); None: this process's user@host.
    actor: str | None = None


@dataclass(frozen=True)
class Queued:
    """The input waits for another live process, which runs it after its turn."""

    session_id: UUID
    holder: str
    until: str
    position: int
    total: int

    @property
    def reason(self) -> str:
        return (f"queued as input {self.position} of {self.total}: another process ({self.holder}) is running this session "
                f"and runs this input after its turn")


@dataclass
class Driven:
    outcome: TurnOutcome | None
    queued: Queued | None = None
    #: Every turn this drive ran, in order (`outcome` is the last): with draining, the inputs queued before and
    #: after the caller's own, so a client can tell which of them answered its input.
    outcomes: list[TurnOutcome] = field(default_factory=list)

    def answered_inputs(self, store: ChronicleStore) -> list[str | None]:
        """The input each turn of this drive answered, in order: the rule by which a caller finds its own prompt's
        turn (or learns it never ran: an earlier queued input's turn stopped the drive first)."""
        return [answered_input(store, outcome) for outcome in self.outcomes]


def answered_input(store: ChronicleStore, outcome: TurnOutcome) -> str | None:
    """The input a turn answered; read from the turn when the outcome was made without it in hand."""
    if outcome.input_id is not None or not outcome.turn_id:
        return outcome.input_id
    try:
        return store.turn(outcome.turn_id).input_id
    except (ForgottenSession, NotFound):
        return None  # a turn erased while it ran (`forget` from elsewhere) answered nothing anyone can read now


def stored_attachments(store: ChronicleStore, items: Sequence[Any] | None) -> list[dict[str, Any]] | None:
    """Every attachment checked before any is stored; the reference blocks an input records (None: none)."""
    try:
        return store_attachments(store, items) or None
    except AttachmentError as exc:
        raise AppError(str(exc), 2) from None


def retry_policy(max_attempts: int | None) -> RetryPolicy:
    try:
        return RetryPolicy.from_env(max_attempts)
    except RetrySettingError as exc:
        raise AppError(str(exc), 2) from None


def settings_for(options: RunOptions, workspace: Path, recorded: AgentSpec | None = None,
                 in_code: dict[str, Any] | None = None, compaction: dict[str, Any] | None = None) -> Settings:
    """`in_code`: the limits a new session's Agent gave (`Agent(doom_loop=...)`), under the flags, over chronicle.toml;
    `compaction`: its `[compaction]` keys, over the file's (a continued session's are those it recorded)."""
    try:
        return load_settings(options.limits, workspace, recorded.limits if recorded is not None else None, in_code,
                             recorded.compaction if recorded is not None else compaction)
    except SettingsError as exc:
        raise AppError(str(exc), 2) from None


def _new_session_spec(options: RunOptions, workspace: Path) -> tuple[AgentSpec, Settings]:
    """The spec a new session records, with the limits it starts under (which the spec's own, given in code, shape)."""
    spec = new_spec(workspace, options.provider, options.model, options.max_iterations, options.agents,
                    registry=options.registry, extra_tools=options.tools)
    settings = settings_for(options, workspace, in_code=spec.limits, compaction=spec.compaction)
    return spec.model_copy(update={"limits": settings.limits()}), settings


class Conversation:
    """One session opened for running turns here; `submit` records inputs, `drive` runs them."""

    def __init__(self, store: ChronicleStore, sid: UUID, loop: AgentLoop, settings: Settings, options: RunOptions,
                 notes: list[str] | None = None) -> None:
        self.store, self.session_id, self.loop, self.settings, self.options = store, sid, loop, settings, options
        #: Things the client should tell the person (an ignored flag), one line each.
        self.notes = notes or []
        #: Those of the notes that say something the client gave is ignored (the library warns of them).
        self.ignored: list[str] = []
        #: Those that say what finishing an interrupted undo/redo --files did before anything ran (warned of too).
        self.finished: list[str] = []
        #: The input `open` recorded (`first_input`), None if it recorded none: which of the turns a drive runs is its answer.
        self.input_id: str | None = None
        self.holder = holder_name()

    @staticmethod
    def check_new(options: RunOptions | None = None, first_input: str | None = None,
                  attachments: Sequence[Any] | None = None) -> None:
        """What `open` refuses in starting a new session (no provider, a workspace that is not there,
        a bad chronicle.toml, a tool that does not import, an empty prompt, an attachment it cannot
        send), checked without a store: a client runs this before it creates one, so a bad flag or
        argument leaves no empty store behind."""
        options = options or RunOptions()
        if first_input is not None and not first_input.strip():
            raise AppError("the prompt is empty; say what the agent should do", 2)
        try:
            checked_attachments(attachments)
        except AttachmentError as exc:
            raise AppError(str(exc), 2) from None
        try:
            environment()
        except EnvironmentSettingError as exc:
            raise AppError(str(exc), 2) from None
        workspace = resolve_workspace(options.workspace)
        settings_for(options, workspace)  # a bad flag or [limits] is refused before the registry is read
        spec, settings = _new_session_spec(options, workspace)
        try:
            loop_parts(spec, provider_name=spec.provider or None, model=options.model, workspace=workspace, settings=settings)
        except LoopSetupError as exc:
            raise AppError(str(exc), 2) from None

    @classmethod
    def open(cls, store: ChronicleStore, session: str | UUID | None = None, options: RunOptions | None = None,
             subscribers: Iterable[Callable[[Any], Any]] = (), approver: Any = None, first_input: str | None = None,
             attachments: Sequence[Any] | None = None) -> "Conversation":
        """Continue `session`, or start a new one (recording `first_input` with it, atomically).

        `attachments` (paths, or (bytes, media type) pairs) go with `first_input`: checked, then stored
        once by content, before the input that refers to them is recorded.

        Everything that could make the turn impossible (provider, workspace, chronicle.toml, the
        registry) is checked by building the loop before anything is recorded."""
        options = options or RunOptions()
        if first_input is not None and not first_input.strip():
            raise AppError("the prompt is empty; say what the agent should do", 2)
        try:
            env = environment()
        except EnvironmentSettingError as exc:
            raise AppError(str(exc), 2) from None
        sid = session_id(store, session) if session else None
        recorded = store.session(sid).spec if sid else None
        if sid is not None and (never := cancelled_before_start(store, store.session(sid, copy=False))) is not None:
            # Its turns run queued inputs oldest first: the cancelled one would run before the new prompt.
            raise AppError(f"{never}, so nothing more runs on this session; start a new one (leave out --session)", 1)
        workspace = resolve_workspace(options.workspace or session_workspace(recorded))
        settings = settings_for(options, workspace, recorded)
        notes: list[str] = []
        ignored: list[str] = []  # what the client gave and the session does not use: notes too, and the library warns
        if recorded is not None:
            spec: AgentSpec = recorded
            refuse_provider_switch(sid, recorded.provider, options.provider)
            provider = options.provider or recorded.provider or None
            if options.agents is not None:
                notes.append(f"note: --agents ignored; session {sid} keeps the agents recorded when it started")
            if options.tools:
                notes.append(f"note: --tools ignored; session {sid} keeps the tools recorded when it started")
            if options.registry is not None and (note := ignored_in_code(sid, recorded, options.registry, options.max_iterations)):
                ignored.append(note)
            if options.model and options.model.strip() != recorded.model:
                # Recorded (below, once the loop is built) rather than applied to this process alone.
                spec = recorded.model_copy(update={"model": check_model(options.model, recorded.provider)})
        else:
            spec, settings = _new_session_spec(options, workspace)
            provider = spec.provider or None
        broker = Broker()
        for subscriber in subscribers:
            broker.subscribe(subscriber)
        loop_options = LoopOptions(max_iterations=options.max_iterations, auto_approve=options.auto_approve,
                                   retry=retry_policy(options.max_attempts), max_tokens=options.max_tokens or env.max_tokens)
        try:
            loop = build_loop(store, spec, provider_name=provider, model=options.model, workspace=workspace, settings=settings,
                              options=loop_options, broker=broker, approver=approver, interactive=options.interactive,
                              say=ignored.append, recorded=recorded is not None)
            if sid is not None:
                ignored.extend(refuse_vanished_tools(store, store.session(sid), loop.toolbox, workspace))
        except LoopSetupError as exc:
            raise AppError(str(exc), 2) from None
        if sid is not None and first_input is not None:
            # The turns the next one is built on are read before anything is recorded (attachments, a model change,
            # the input): one the store can no longer read (a row deleted or damaged by hand) would fail the turn
            # anyway, after leaving an input queued that the session cannot run. Read as the loop's context reads them
            # (one batch, each ended turn's messages kept for the process), so the turn's run reads none of them again.
            turn_messages_cache(store).many(store.session(sid, copy=False).head)
        blocks = stored_attachments(store, attachments)
        # The files an interrupted undo/redo --files owes are written before the session goes on here, as `resume`
        # and workers do: otherwise its next turns would run on a workspace the log says was put back.
        finished = None
        if sid is not None and store.session(sid, copy=False).files_owed:
            from .worker import owed_files_finished

            finished = owed_files_finished(store, sid)
        if finished is not None:
            notes.append(f"note: {finished}")
        if sid is not None and recorded is not None and spec.model != recorded.model:
            notes.append(change_model(store, sid, spec.model, actor=options.actor).line())
        input_id: str | None = None
        if sid is None:
            created, input_id = start_session(store, spec, first_input, attachments=blocks)
            sid = created.id
        elif first_input is not None:
            waiting = store.session(sid, copy=False).pending_auth  # only read
            input_id = submit_input(store, sid, first_input, attachments=blocks)
            if waiting is not None:
                notes.append(credential_note(waiting))
        conversation = cls(store, sid, loop, settings, options, [*ignored, *notes])
        conversation.ignored = ignored
        conversation.finished = [f"note: {finished}"] if finished is not None else []
        conversation.input_id = input_id
        return conversation

    def submit(self, text: str) -> str:
        """Record an input durably (before anything runs); it runs in order after those queued before it."""
        if not text.strip():
            raise AppError("the prompt is empty; say what the agent should do", 2)
        return submit_input(self.store, self.session_id, text)

    def switch(self, sid: UUID) -> None:
        """Go on in another session of the same agent (chat's /fork)."""
        self.session_id = sid

    def new_thread(self) -> UUID:
        """Chat's /new (the seed's NewThread): a session is our thread, so a new one of the same agent, as recorded
        (spec, tools, limits), with an empty history; the conversation goes on there."""
        spec = self.store.session(self.session_id).spec
        created, _ = start_session(self.store, spec)
        self.session_id = created.id
        return created.id

    def switch_thread(self, ref: str) -> UUID:
        """Chat's /thread ID (the seed's SwitchThread): go on in another top-level session of the same agent. One of
        another agent, tool set, provider or workspace needs its own loop: `chronicle chat --session ID`."""
        sid = session_id(self.store, ref)
        other, mine = self.store.session(sid), self.store.session(self.session_id)
        if other.parent_session_id is not None:
            raise AppError(f"session {sid} is a sub-agent's; its parent {other.parent_session_id} is the thread to open", 2)
        same = ("name", "tools", "provider", "workspace", "registry", "mcp_tools")
        differs = [k for k in same if getattr(other.spec, k) != getattr(mine.spec, k)]
        if differs:
            raise AppError(f"session {sid} has another {', '.join(differs)}; open it with `{pasteable(f'chat --session {sid}', self.store.url)}`", 2)
        self.session_id = sid
        return sid

    async def drive(self, drain: bool = True, handle_signals: bool = True) -> Driven:
        """Run the session's turns under its lease, with agent_start/agent_end around them (see `drive`)."""
        return await drive(self.loop, self.session_id, holder=self.holder, lease_s=self.options.lease_s, drain=drain,
                           handle_signals=handle_signals)


def credential_note(waiting: dict[str, Any]) -> str:
    """What run and chat say of a message auth mode took (runtime/credentials.py): never the value."""
    return (f"credential {waiting['name']!r} stored in the workspace's credential store (.chronicle/credentials.json), "
            "not in the event log; no turn ran: send the next message to go on")


async def drive(loop: AgentLoop, sid: UUID, *, holder: str | None = None, lease_s: float = DEFAULT_LEASE_S, drain: bool = True,
                handle_signals: bool = True) -> Driven:
    """Run the session's turns under its lease, with agent_start/agent_end around them.

    With `drain`, inputs queued while this process works run too, in order, as long as each
    turn completes. SIGINT/SIGTERM cancel the running turn (not the process) when
    `handle_signals`. If a live process holds the session, nothing runs here: Driven.queued says who."""
    store = loop.store
    holder = holder or holder_name()
    session = store.session(sid)
    spec = session.spec
    links = {
        "parent_session_id": str(session.parent_session_id) if session.parent_session_id else None,
        "parent_tool_call_id": str(session.parent_tool_call_id) if session.parent_tool_call_id else None,
    }
    await loop.emit(AgentStart(session_id=str(sid), agent=spec.name, instance=spec.instance or None, depth=spec.depth,
                               prefix=spec.prefix or DEFAULT_PREFIX, **links))
    outcome: TurnOutcome | None = None
    queued: Queued | None = None
    outcomes: list[TurnOutcome] = []
    while True:
        async with leased(store, sid, holder, lease_s, loop.clock) as keeper:
            if keeper is None:
                queued = _queued(store, sid) if outcome is None else None
                break
            while not keeper.lost:
                latest = await run_one(loop, sid, handle_signals)
                if latest is None:
                    break
                outcome = latest
                outcomes.append(latest)
                keeper.store_lost = latest.status == "interrupted"  # the loop's word for "lost the event store"
                if not drain or latest.status != "completed":
                    break
        # Released: an input queued by a process that found the lease taken just before we let
        # go would wait for nobody, so look once more and take the lease again for it.
        if not drain or (outcome is not None and outcome.status != "completed") or not store.session(sid).queue:
            break
    reason: str | None
    if queued is not None:
        status, reason = "queued", queued.reason
    else:
        status, reason = (outcome.status, outcome.reason) if outcome else ("idle", None)
    await loop.emit(AgentEnd(session_id=str(sid), agent=spec.name, instance=spec.instance or None, status=status, reason=reason,
                             depth=spec.depth, **links))
    return Driven(outcome, queued, outcomes)


async def drive_session(loop: AgentLoop, sid: UUID, drain: bool = True, handle_signals: bool = False) -> TurnOutcome | None:
    """`drive`, for callers that only want the last outcome (None: nothing ran, or another live process holds the session)."""
    return (await drive(loop, sid, drain=drain, handle_signals=handle_signals)).outcome


def _queued(store: ChronicleStore, sid: UUID) -> Queued:
    session = store.session(sid)
    lease = current_lease(store, sid)
    until = lease.expires_at.isoformat() if lease and lease.expires_at else "?"
    total = len(session.queue)
    return Queued(sid, lease.holder if lease and lease.holder else "?", until, total, total)


async def run_one(loop: AgentLoop, sid: UUID, handle_signals: bool = True) -> TurnOutcome | None:
    """One turn in its own task, so that SIGINT/SIGTERM cancel the turn and not the process."""
    task = asyncio.ensure_future(loop.run_next(sid))
    event_loop = asyncio.get_running_loop()
    signals = (signal.SIGINT, signal.SIGTERM) if handle_signals else ()
    for sig in signals:
        try:
            event_loop.add_signal_handler(sig, task.cancel)
        except (NotImplementedError, RuntimeError):
            pass
    try:
        return await task
    finally:
        for sig in signals:
            try:
                event_loop.remove_signal_handler(sig)
            except (NotImplementedError, RuntimeError):
                pass


async def run(store: ChronicleStore, prompt: str, session: str | UUID | None = None, options: RunOptions | None = None,
              subscribers: Iterable[Callable[[Any], Any]] = (), approver: Any = None, handle_signals: bool = False) -> Driven:
    """`chronicle run` as one call: record the prompt (new session or continued), run until it ends or pauses."""
    conversation = Conversation.open(store, session, options, subscribers, approver, first_input=prompt)
    return await conversation.drive(handle_signals=handle_signals)


def refuse_provider_switch(sid: UUID | None, recorded: str | None, given: str | None) -> None:
    """A session's provider is part of its record (resume, replay and cost read it from there), so
    `--provider` may not quietly send one turn of it to another vendor, unrecorded. The same kind
    with another argument (another script for `scripted:`) is the same provider and stays allowed."""
    if not given or not recorded or given.split(":", 1)[0] == recorded.split(":", 1)[0]:
        return
    raise AppError(
        f"session {sid} runs on provider {recorded.split(':', 1)[0]} (recorded when it started); --provider "
        f"{given.split(':', 1)[0]} would switch it for this turn without a record: drop --provider to continue it, "
        "or start a new session with that provider", 2)

