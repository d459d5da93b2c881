"""`Chronicle`: one event store, and every use case the CLI offers, as methods.

Each method hands over to the use case in runtime/app that the CLI command calls, and returns
what that command's `--json` prints (dicts, lists of dicts), so a program and a person at a
terminal see the same facts. A failure the CLI reports with an exit code raises
`ChronicleError` (runtime.app's AppError) with that code.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence, overload
from uuid import UUID

from typing_extensions import deprecated

from chronicle.runtime.app import answers, approvals, bundles, controls, model_change, queries, timetravel
from chronicle.runtime.app import archive as archiving
from chronicle.runtime.app import forget as forgetting
from chronicle.runtime.app import jobs as job_cases
from chronicle.runtime.app import resume as resuming
from chronicle.runtime.app import routines as routine_cases
from chronicle.runtime.app import tasks as task_cases
from chronicle.runtime.app import why as decisions
from chronicle.runtime.app.errors import AppError, DefinitionError, known_failure
from chronicle.runtime.app.specs import normalise_provider, resolve_workspace
from chronicle.runtime.app.store_location import missing_store
from chronicle.runtime.app.worker import Overrides, WorkerOptions, compose_worker, worker_name
from chronicle.runtime.config import resolve_db_url
from chronicle.runtime.import_paths import bind, using
from chronicle.runtime.leases import DEFAULT_LEASE_S
from chronicle.runtime.live import Broker, Guarded
from chronicle.runtime.loop import LoopOptions
from chronicle.runtime.off_loop import off_the_loop
from chronicle.runtime.routine_engine import RoutineEngine
from chronicle.runtime.routines import Routine
from chronicle.runtime.self_repair import DEFAULT_STUCK_AFTER_S, DEFAULT_TOOL_FAILURES, SelfRepair, repair_row
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.store_open import open_store, told_at_once_when_refused
from chronicle.runtime.tool_runner import TOOL_INTERRUPTS
from chronicle.runtime.tools.threads import given_up_line, owed_to, wait_for_late_ends

from . import runs
from .agent import Agent
from .arguments import (
    FromOne,
    FromZero,
    IdleSeconds,
    LeaseSeconds,
    ModelName,
    PollSeconds,
    RowCount,
    Seconds,
    SessionRef,
    blocking,
    checked,
    in_event_loop,
    refused_in_loop,
)
from .errors import ChronicleError, warn, warn_at
from .event_stream import EventStream
from .results import Answered as Answered  # where programs imported them from
from .results import RunResult as RunResult
from .running_turns import RunningTurns, caller_cancels, in_own_task

if TYPE_CHECKING:  # the `server` extra's; imported by http_app() alone, when it is called
    from fastapi import FastAPI

_log = logging.getLogger("chronicle")


def _warn_refused(command: str, sid: Any, refused: list[str], url: str) -> None:
    """A file undo/redo --files left as it is (changed since): the CLI exits 1 after writing the rest; the library
    returns the row (its `files` say `refused`) and warns with the CLI's line, since the rest was done and recorded."""
    line = timetravel.refused_line(command, sid, refused, url)
    if line is not None:
        warn(line)


@contextmanager
def _as_chronicle_errors(url: str | None = None) -> Iterator[None]:
    """What the CLI reports as an `error:` line and exit code is ChronicleError with the same words and code
    (runtime.app.errors.known_failure decides for both): an unknown session id 2, another missing id 1, a row
    that does not decode 1, a read-only database 1, a chronicle.toml that cannot work 2. Anything else is a bug,
    and its traceback is kept. `url`: the store's, named by a line about the store itself (a damaged file, a full disk)."""
    try:
        yield
    except AppError:
        raise
    except Exception as exc:
        known = known_failure(exc, url)
        if known is None:
            raise
        raise known from None


@contextmanager
def _interrupted_by_tools() -> Iterator[None]:
    """A tool that raised KeyboardInterrupt cancelled its turn (recorded, runtime/tool_runner.py); the program then
    hears KeyboardInterrupt, as from Ctrl-C during the call, rather than going on to its next prompt."""
    heard: list[str] = []
    token = TOOL_INTERRUPTS.set(heard)
    try:
        yield
    finally:
        TOOL_INTERRUPTS.reset(token)
    if heard:
        raise KeyboardInterrupt(heard[0])


class Chronicle:
    """An event store (SQLite file or PostgreSQL) and the agents' sessions in it.

    `Chronicle()` uses CHRONICLE_DB, else the default SQLite file under ./.chronicle/, as the CLI does.
    """

    def __init__(self, url: str | None = None) -> None:
        if url is not None and not isinstance(url, str):  # a Path, say: the URL says which kind of store
            raise ChronicleError(f"Chronicle(): url: expected a database URL (str), like sqlite:////abs/path/agent.db or "
                                 f"postgresql://user@host/db, got {type(url).__name__}", 2)
        try:
            self.url = resolve_db_url(url)
        except ValueError as exc:  # the URL's ConfigError: a setting that cannot work, as the CLI's exit 2
            raise ChronicleError(str(exc), 2) from None
        #: The URL as given (else CHRONICLE_DB's); None when the default store was looked for upward.
        self._named = url or os.environ.get("CHRONICLE_DB")
        self._store: ChronicleStore | None = None
        self._routine_engines: dict[Any, RoutineEngine] = {}
        self._turns = RunningTurns()

    @property
    def store(self) -> ChronicleStore:
        """The store, created if there is none yet: what running an agent (or submitting, importing, a worker, a
        routine fired) needs, as the CLI's commands that record something new create one."""
        if self._store is None:
            self._store = open_store(self.url)  # ChronicleError with the CLI's words when it does not open
            # Kept open for the program's life, as the server's: a database dropped under it is told in half a
            # second (a store error, as the CLI's), not after ten pool timeouts (52 s).
            told_at_once_when_refused(self._store)
        return self._store

    def _store_for_new(self, check: Callable[[], None]) -> ChronicleStore:
        """`store` for a method that records a new session: when that would create the store, `check` (what the
        method refuses, found without a store) runs first, so a refused call leaves no empty store behind."""
        if self._store is None and missing_store(self.url, self._named, "library") is not None:
            check()
        return self.store

    @property
    def _existing(self) -> ChronicleStore:
        """The store for a method that reads, or acts on what the store holds: a SQLite file that does not exist, or
        a PostgreSQL database or schema with no store in it, is a ChronicleError (code 1) saying so, as the CLI's
        readers exit 1, not a new empty store left behind."""
        if self._store is None:
            if (missing := missing_store(self.url, self._named, "library")) is not None:
                raise missing
            self._store = open_store(self.url, create=False, client="library")
            told_at_once_when_refused(self._store)
        return self._store

    #: Seconds closing waits for the sync tool functions a cancel or a timeout left running (docs/tools.md) to end
    #: and record their late ends; past it the store closes without them, said on one warning line.
    late_end_wait_s: float = 30.0

    def close(self) -> None:
        """Close the store. A turn still running in one of this Chronicle's tasks (a `stream` not read to its end
        and not yet let go of, a `run` not awaited) is cancelled, and the store closes once it has recorded that,
        and once the sync tool functions left running have recorded their late ends (up to `late_end_wait_s`)."""
        store, self._store = self._store, None
        if store is not None:
            self._turns.cancel_then(lambda: self._close_when_owed_nothing(store))

    def _close_when_owed_nothing(self, store: ChronicleStore) -> None:
        """Close `store` once no late end is owed to it. Inside a running event loop the wait is a thread's (the
        store closes a little after `close` returns): it would hold the loop, which a tool function may need."""
        if not owed_to(store):
            store.close()
            return

        def wait_then_close() -> None:
            self._late_ends_waited(store)
            store.close()

        if in_event_loop():
            threading.Thread(target=wait_then_close, name="chronicle-late-ends", daemon=False).start()
        else:
            wait_then_close()

    def _late_ends_waited(self, store: ChronicleStore) -> None:
        given_up = wait_for_late_ends(store, self.late_end_wait_s)
        if given_up:
            _log.warning(given_up_line(given_up, self.late_end_wait_s))

    def __enter__(self) -> "Chronicle":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self) -> "Chronicle":
        return self

    async def __aexit__(self, *exc: object) -> None:
        """`async with Chronicle(...)`: as `with`, but the turns still running are cancelled and their cancels
        recorded, and the late ends of the tool functions left running recorded, before the block ends."""
        try:
            await self._turns.cancelled_and_ended()
            store = self._store
            if store is not None and owed_to(store):  # waited for on a thread: the loop goes on meanwhile
                await off_the_loop(self._late_ends_waited, store)
        finally:  # cancelled while waiting: `close` still cancels what runs, and waits on its own thread
            self.close()

    # -- running agents ------------------------------------------------------------------------

    @checked
    async def run(self, agent: Agent, prompt: str, *, session: SessionRef | None = None, workspace: str | Path | None = None,
                  attachments: Sequence[Any] | None = None, auto_approve: bool = False, max_iterations: FromOne | None = None,
                  on_event: Callable[[Any], Any] | None = None, model: ModelName | None = None,
                  max_attempts: FromOne | None = None) -> RunResult:
        """Record the prompt (a new session, or `session` continued) and run until the turn ends, pauses or fails.

        `model` (else the agent's): a new session's model; on a continued session another one is recorded as a
        change (Session.ModelChanged, as `set_model`) before the turn, so every later turn uses it too.
        `on_event`: called with each live event (what `stream` yields); one that raises does not stop the turn, and
        its first failure is said (a ChronicleWarning at the line that raised, and a note on the result).
        `max_attempts`: tries per model call, the first included, as `run --max-attempts` (default:
        CHRONICLE_MAX_ATTEMPTS, else 8); a retryable error (rate limit, overload) is retried with backoff until then,
        each retry recorded.

        A cancel of the task awaiting it (`asyncio.wait_for`, `asyncio.timeout`, `task.cancel()`) cancels the turn,
        which records the cancel, then raises CancelledError as any coroutine cancelled does."""
        cancelled = caller_cancels()
        failed: list[str] = []  # the callback's first failure, said as it happens and noted on the result

        def said(line: str, exc: BaseException) -> None:
            failed.append(f"note: {line}")
            warn_at(failed[-1], exc)

        callbacks: list[Callable[[Any], Any]] = [Guarded(on_event, said)] if on_event else []
        with _as_chronicle_errors(self.url), using(runs.checked(agent)._live):  # this Agent's own objects, whatever shares their paths
            # a session to continue is looked for in a store that exists: none is made only to say it is not there
            store = self._existing if session is not None else self._store_for_new(
                lambda: runs.check_new(agent, prompt, workspace, attachments, auto_approve, max_iterations, model, max_attempts))
            if session is not None and self._turns.ending():  # a stream just let go of: its turn records its cancel first
                await self._turns.cancelled_ones_ended(queries.session_id(store, session))
            conversation = runs.open_conversation(store, agent, prompt, session, workspace, attachments, auto_approve,
                                                  max_iterations, callbacks, model=model,
                                                  max_attempts=max_attempts)
            for note in [*conversation.ignored, *conversation.finished]:
                warn(note)
            with self._turns.running(conversation.session_id), _interrupted_by_tools():
                driven = await conversation.drive(handle_signals=False)
            cancelled()  # recorded: now the caller's own cancel, if it was one
            return RunResult.of_run(self.store, conversation.session_id, driven, conversation.input_id, [*conversation.notes, *failed])

    def run_sync(self, agent: Agent, prompt: str, *, session: SessionRef | None = None, workspace: str | Path | None = None,
                 attachments: Sequence[Any] | None = None, auto_approve: bool = False,
                 max_iterations: int | None = None, model: str | None = None,
                 max_attempts: int | None = None) -> RunResult:
        """`chronicle run PROMPT` from code: blocks until the turn completes, fails, stops or waits for approval."""
        return blocking("run_sync", "run", lambda: self.run(agent, prompt, session=session, workspace=workspace,
                                                           attachments=attachments, auto_approve=auto_approve,
                                                           max_iterations=max_iterations, model=model,
                                                           max_attempts=max_attempts))

    @checked
    def stream(self, agent: Agent, prompt: str, *, session: SessionRef | None = None, workspace: str | Path | None = None,
               attachments: Sequence[Any] | None = None, auto_approve: bool = False,
               max_iterations: FromOne | None = None, model: ModelName | None = None,
               max_attempts: FromOne | None = None) -> EventStream:
        """The live events of `run --json`, as pydantic models (`event.model_dump()` is the JSON line). Leaving the
        `async for` before its end (`break`, an exception) cancels the turn there and then, recorded as a cancel."""
        return EventStream(lambda on_event: self.run(agent, prompt, session=session, workspace=workspace,
                                                     attachments=attachments, auto_approve=auto_approve,
                                                     max_iterations=max_iterations, on_event=on_event, model=model,
                                                     max_attempts=max_attempts), let_go=self._turns.let_go)

    @checked
    def submit(self, agent: Agent, prompt: str, *, session: SessionRef | None = None, workspace: str | Path | None = None,
               attachments: Sequence[Any] | None = None) -> dict[str, Any]:
        """Record the prompt for a worker (`chronicle worker`) to run: `submit --json`'s {"session_id", "input_id"}."""
        with _as_chronicle_errors(self.url), using(runs.checked(agent)._live):
            store = self._existing if session else self._store_for_new(
                lambda: runs.check_submitted(agent, prompt, workspace, attachments))
            return runs.submit(store, agent, prompt, session, workspace, attachments)

    @checked
    async def resume_async(self, session: SessionRef, *, auto_approve: bool = False, workspace: str | Path | None = None) -> RunResult:
        """Continue a session left in flight (a crash, an answered approval) or with queued input, as `chronicle resume`:
        status `awaiting_approval` (exit code 3) while a call still waits for a decision, `idle` when nothing is left.
        A cancel of the task awaiting it is recorded on the turn it runs, then raised, as `run`'s."""
        cancelled = caller_cancels()
        with _as_chronicle_errors(self.url):
            sid = queries.session_id(self._existing, session)
            notes: list[str] = resuming.finish_owed_files(self._existing, sid)  # an interrupted undo/redo --files, finished first
            for note in notes:
                warn(note)
            stalled = resuming.blocked(self._existing, sid, auto_approve)
            overrides = Overrides(workspace=Path(workspace) if workspace else None, options=LoopOptions(auto_approve=auto_approve))
            if isinstance(stalled, resuming.AwaitingApproval) and (why := resuming.cannot_go_on(self._existing, stalled, overrides)):
                raise AppError(why, 2)  # said before anyone approves: the approval would only lead to this refusal
            if isinstance(stalled, resuming.AwaitingApproval):
                return RunResult(str(sid), "awaiting_approval", "", 3, stalled.message, notes=tuple(notes))
            if stalled is not None:
                return RunResult.of(sid, None, "idle", stalled, notes)
            finished = len(notes)
            with _interrupted_by_tools():
                done = await in_own_task(resuming.resume_one(self._existing, sid, overrides, Broker(), worker_name(),
                                                             auto_approve=auto_approve, say=notes.append))
            for note in notes[finished:]:  # resume_one builds the loop and runs it in one call: said once it returns
                warn(note)
            cancelled()
        if isinstance(done, resuming.Busy):
            return RunResult.of(sid, None, "busy", done.message, notes)
        with _as_chronicle_errors(self.url):
            answered = tuple(Answered.of(self._existing, outcome) for outcome in done)
        return replace(RunResult.of(sid, done[-1] if done else None, notes=notes), answered=answered)

    def resume(self, session: SessionRef, *, auto_approve: bool = False, workspace: str | Path | None = None) -> RunResult:
        """`resume_async`, blocking (not inside an event loop)."""
        return blocking("resume", "resume_async", lambda: self.resume_async(session, auto_approve=auto_approve, workspace=workspace))

    @checked
    async def answer_async(self, session: SessionRef, input_id: str | None, *, timeout_s: Seconds | None = None,
                           poll: PollSeconds = 0.2) -> RunResult:
        """The answer to one recorded input (a `RunResult`'s `input_id`, `submit`'s), once its turn has ended or waits
        for an approval, whichever process runs it: what a caller whose `run` came back `queued` (another call or a
        worker held the session) awaits for its own prompt. Status `queued` (`input_queued`, `reason` says why) when
        it is still unanswered after `timeout_s`, or waits behind a turn that waits for an approval no process is
        running; ChronicleError 2 for an input the session never had. Read every `poll` seconds off the event loop.

        `input_id` may be None so that a `RunResult`'s is taken as it is typed (`run`'s always names its prompt);
        None, the `input_id` of a result that recorded no input (`resume`'s), is ChronicleError 2."""
        if input_id is None:
            raise ChronicleError("answer(): input_id is None: that result recorded no input (`resume` records none); "
                                 "pass the input_id that run, submit or steer returned", 2)
        with _as_chronicle_errors():
            sid = queries.session_id(self._existing, session)
            finder = answers.AnswerFinder(self._existing, sid, input_id)
            deadline = None if timeout_s is None else asyncio.get_running_loop().time() + timeout_s
            while True:
                found = await off_the_loop(finder.look)
                if not isinstance(found, answers.Waiting):
                    return replace(RunResult.of(sid, found), input_id=input_id, answered=(Answered.of(self._existing, found),))
                stalled = found.stalled
                if stalled is None and deadline is not None and asyncio.get_running_loop().time() >= deadline:
                    stalled = f"input {input_id} was not answered within {timeout_s:g} s; it stays queued"
                if stalled is not None:
                    return replace(RunResult.of(sid, None, "queued", stalled), input_id=input_id, input_queued=True)
                await asyncio.sleep(poll)

    def answer(self, session: SessionRef, input_id: str | None, *, timeout_s: float | None = None, poll: float = 0.2) -> RunResult:
        """`answer_async`, blocking (not inside an event loop)."""
        return blocking("answer", "answer_async", lambda: self.answer_async(session, input_id, timeout_s=timeout_s, poll=poll))

    # -- background jobs (`chronicle jobs`) --------------------------------------------------------

    @checked
    def submit_job(self, agent: Agent, prompt: str, *, workspace: str | Path | None = None,
                   max_iterations: FromOne | None = None) -> dict[str, Any]:
        """`jobs submit --json`: a new session queued for a worker, checked as `run` checks it (ChronicleError 2 records nothing)."""
        with _as_chronicle_errors(self.url), using(runs.checked(agent)._live):
            runs.for_a_worker(agent)
            store = self._store_for_new(lambda: runs.check_submitted(agent, prompt, workspace, max_iterations=max_iterations))
            row = job_cases.submit(store, prompt, provider=agent.provider, model=agent.model,
                                   workspace=Path(workspace) if workspace else None, max_iterations=max_iterations,
                                   registry=agent.registry(workspace), origin="api")
            bind(row["job_id"], agent._live)  # a job's id is its session's
            return row

    def jobs(self) -> list[dict[str, Any]]:
        """`chronicle jobs --json`: every job, oldest first, its status read from its session."""
        with _as_chronicle_errors(self.url):
            return job_cases.listing(self._existing)

    @checked
    def job(self, job_id: str) -> dict[str, Any]:
        """`jobs status ID --json`'s row (ChronicleError 1 if the session is not a job)."""
        with _as_chronicle_errors(self.url):
            return job_cases.one(self._existing, job_id)

    @checked
    def cancel_job(self, job_id: str) -> dict[str, Any]:
        """`jobs cancel ID --json`: a queued job never starts; a running one stops at its next safe point; one that
        already ended (completed, failed, stopped, cancelled) raises ChronicleError 1 and nothing is recorded."""
        with _as_chronicle_errors(self.url):
            return job_cases.cancel(self._existing, job_id)

    @checked
    async def work_async(self, *, once: bool = False, idle_exit: IdleSeconds | None = None, poll: PollSeconds = 0.5,
                         concurrency: FromOne = 4, lease_s: LeaseSeconds = DEFAULT_LEASE_S, auto_approve: bool = False,
                         provider: str | None = None, model: ModelName | None = None, workspace: str | Path | None = None,
                         stuck_after_s: Seconds = DEFAULT_STUCK_AFTER_S, tool_failures: FromOne = DEFAULT_TOOL_FAILURES,
                         stop: threading.Event | None = None, log: Callable[[str], Any] | None = None) -> list[RunResult]:
        """`chronicle worker` in this process: claim the sessions that need work (queued inputs — `submit`, `submit_job`,
        a job routine — and turns left in flight) under their leases, beside any other workers, and run them.

        The same worker as the command's (runtime.app.worker.compose_worker), its options named alike: `once` (exit
        as soon as no session needs work), `idle_exit` (seconds idle, then exit), `poll`, `concurrency`, `lease_s`,
        `auto_approve` (`--yes`), `provider`/`model`/`workspace` (override what sessions recorded), `stuck_after_s` and
        `tool_failures` (self-repair). The workspace's routines fire as in the command. Without `once`, `idle_exit` or
        `stop` it runs until cancelled, as the command does: set `stop` (a threading.Event, from any thread) to finish
        the turns in hand and return. `log`: each line the command prints (default: the `chronicle.worker` logger).
        Returns one RunResult per turn it ran, in the order they ended, its `answered` naming the input it answered.
        Raises ChronicleError (code 1) when it stopped because its SQLite store's file was deleted or replaced under
        it, as the command exits 1: it could record nothing more and would never see new work."""
        with _as_chronicle_errors(self.url):
            overrides = Overrides(provider=normalise_provider(provider), model=model,
                                  workspace=resolve_workspace(workspace) if workspace else None,
                                  options=LoopOptions(auto_approve=auto_approve))
            worker = compose_worker(self.store, overrides, WorkerOptions(concurrency, poll, lease_s, idle_exit, once),
                                    log=log or logging.getLogger("chronicle.worker").info,
                                    stuck_after_s=stuck_after_s, tool_failures=tool_failures)
            if stop is not None:
                worker.stop_when = stop.is_set
            await worker.run()
            if worker.stopped_because:  # its store's file deleted under it: the command exits 1 with this line
                raise ChronicleError(worker.stopped_because, 1)
            return [replace(RunResult.of(outcome.session_id, outcome), answered=(Answered.of(self.store, outcome),))
                    for outcome in worker.outcomes]

    def work(self, *, once: bool = False, idle_exit: float | None = None, poll: float = 0.5, concurrency: int = 4,
             lease_s: float = DEFAULT_LEASE_S, auto_approve: bool = False, provider: str | None = None,
             model: str | None = None, workspace: str | Path | None = None, stuck_after_s: float = DEFAULT_STUCK_AFTER_S,
             tool_failures: int = DEFAULT_TOOL_FAILURES, stop: threading.Event | None = None,
             log: Callable[[str], Any] | None = None) -> list[RunResult]:
        """`work_async`, blocking (not inside an event loop; a thread of its own is fine, with `stop` to end it)."""
        return blocking("work", "work_async", lambda: self.work_async(
            once=once, idle_exit=idle_exit, poll=poll, concurrency=concurrency, lease_s=lease_s, auto_approve=auto_approve,
            provider=provider, model=model, workspace=workspace, stuck_after_s=stuck_after_s, tool_failures=tool_failures,
            stop=stop, log=log))

    # -- routines (`chronicle routines`) ------------------------------------------------------------

    @checked
    def routines(self, workspace: str | Path | None = None, routines: Sequence[Routine] | None = None) -> list[dict[str, Any]]:
        """`routines list --json`: the routines given (checked as chronicle.toml tables are), else the workspace's."""
        with _as_chronicle_errors(self.url):
            return routine_cases.listing(resolve_workspace(workspace), routines)

    @checked
    async def run_routine_async(self, routine: Routine | str, *, workspace: str | Path | None = None, agent: Agent | None = None,
                                auto_approve: bool = False) -> dict[str, Any]:
        """`routines run NAME --json`: fire a routine (a Routine, or the name of a workspace one) now, its guardrails
        applied; a lightweight one runs to its end here, a job is queued for a worker. `agent` (default: the
        workspace's main agent) is what its session records, renamed routine-NAME."""
        with _as_chronicle_errors(self.url):
            ws = resolve_workspace(workspace)
            row = await routine_cases.run(
                self.store, ws, routine, provider=agent.provider if agent else None, model=agent.model if agent else None,
                auto_approve=auto_approve, registry=agent.registry(ws) if agent else None)
        note = routine_cases.unused_approval(row, auto_approve, "auto_approve")
        if note:
            warn(note)
        return row

    def run_routine(self, routine: Routine | str, *, workspace: str | Path | None = None, agent: Agent | None = None,
                    auto_approve: bool = False) -> dict[str, Any]:
        """`run_routine_async`, blocking (not inside an event loop)."""
        return blocking("run_routine", "run_routine_async", lambda: self.run_routine_async(
            routine, workspace=workspace, agent=agent, auto_approve=auto_approve))

    @checked
    def routine_history(self, workspace: str | Path | None = None, routine: str | None = None) -> list[dict[str, Any]]:
        """`routines history --json`: every firing of the workspace's routines, oldest first."""
        with _as_chronicle_errors(self.url):
            return routine_cases.history(self._existing, resolve_workspace(workspace), routine)

    @checked
    def tick_routines(self, *, workspace: str | Path | None = None, routines: Sequence[Routine] | None = None,
                      agent: Agent | None = None) -> list[dict[str, Any]]:
        """One worker tick of the routines (given, else the workspace's): fire due cron slots and routines whose events were
        recorded since the last tick, each at most once per due time across every process, and settle finished runs.
        The first call starts the schedule; call it periodically (under a minute apart). `chronicle worker` (or
        `resume`) runs the sessions of what fired."""
        with _as_chronicle_errors(self.url):
            ws = resolve_workspace(workspace)
            key = (ws, tuple(routines) if routines is not None else None, id(agent))
            engine = self._routine_engines.get(key)
            if engine is None:
                engine = routine_cases.engine(self.store, ws, agent.provider if agent else None, agent.model if agent else None,
                                              agent.registry(ws) if agent else None, routines)
                self._routine_engines[key] = engine
            return routine_cases.tick(engine)

    # -- skills and self-repair (`chronicle skills`, `chronicle repairs`) -------------------------

    @checked
    def skills(self, workspace: str | Path | None = None) -> list[dict[str, Any]]:
        """`skills --json`: the skills a session started in `workspace` (default: the current directory) records, in
        order: `name`, `description`, `mode` (inline | on_demand), `path`, `when_to_use`, `version`, `sha256`, `files`.
        A broken SKILL.md is ChronicleError 2 naming the file, as `run` refuses it. Reads files only, no store."""
        from chronicle.runtime import skills as skill_files

        with _as_chronicle_errors(self.url):
            return [skill_files.skill_row(s) for s in skill_files.workspace_skills(resolve_workspace(workspace))]

    @checked
    def repairs(self, check: bool = False, stuck_after_s: Seconds = DEFAULT_STUCK_AFTER_S,
                tool_failures: FromOne = DEFAULT_TOOL_FAILURES) -> list[dict[str, Any]]:
        """`repairs [--check] --json`: what self-repair found (stuck turns, broken tools) and did, one row per repair:
        `repair_id`, `kind`, `target`, `session_id`, `status`, `result`, `detail`, `attempts`, `detected_at`. With
        `check`, one pass as a worker's monitor makes it first (`stuck_after_s` seconds without an event: stuck;
        `tool_failures` failed runs in a row: broken), each finding recorded."""
        with _as_chronicle_errors(self.url):
            monitor = SelfRepair(self._existing, stuck_after_s=stuck_after_s, tool_failures=tool_failures)
            if check:
                monitor.check()
            return [repair_row(r) for r in monitor.repairs()]

    # -- controls --------------------------------------------------------------------------------

    @checked
    def approve(self, session: SessionRef, tool_call: str | None = None, always: bool = False,
                actor: str | None = None) -> list[dict[str, Any]]:
        """`actor`: who decides, as recorded (default: this process's user@host or CHRONICLE_ACTOR)."""
        with _as_chronicle_errors(self.url):
            return approvals.approve(self._existing, session, tool_call=tool_call, always=always, actor=actor).rows()

    @checked
    def deny(self, session: SessionRef, reason: str | None = None, tool_call: str | None = None,
             actor: str | None = None) -> list[dict[str, Any]]:
        with _as_chronicle_errors(self.url):
            return approvals.deny(self._existing, session, tool_call=tool_call, reason=reason, actor=actor).rows()

    @overload
    def steer(self, session: SessionRef, text: str, wait_batch: bool = False, actor: str | None = None,
              turn: str | UUID | None = None) -> dict[str, Any]: ...

    @overload
    @deprecated("steer(message=...) is steer(text=...), as README documents it")
    def steer(self, session: SessionRef, *, message: str, wait_batch: bool = False, actor: str | None = None,
              turn: str | UUID | None = None) -> dict[str, Any]: ...

    @checked
    def steer(self, session: SessionRef, text: str | None = None, wait_batch: bool = False, actor: str | None = None,
              turn: str | UUID | None = None, *, message: str | None = None) -> dict[str, Any]:
        """`steer --json`: `text` for the running turn to read at its next step, or the session's next input when none
        runs. `turn`: steer only that turn (its id); if it has ended, or the session has no such turn, ChronicleError
        code 1 and nothing is recorded, where without it the text would be queued as the session's next input.
        `message`: the parameter's former name, still taken (keyword only)."""
        if message is not None:
            if text is not None:
                raise ChronicleError("steer(): give text, or message (its former name), not both", 2)
            text = message
        if text is None:
            raise ChronicleError("steer(): text is required", 2)
        with _as_chronicle_errors(self.url):
            return controls.steer(self._existing, session, text, wait_batch=wait_batch, actor=actor, turn_id=turn).row()

    @checked
    def cancel(self, session: SessionRef, wait_s: Seconds = 10.0, actor: str | None = None) -> dict[str, Any]:
        """`cancel --json`: record a cancel of the running turn, then wait up to `wait_s` for it to end (status
        `cancelled`, or `requested` if it runs on). Inside a running event loop that wait would block the loop, and a
        turn running on it could not see the cancel until the wait was over: ChronicleError code 2 says to await
        `cancel_async` there (`wait_s=0`, which only records the request, is taken)."""
        if wait_s > 0 and in_event_loop():
            raise refused_in_loop("cancel", "cancel_async", "waits for the turn to end",
                                  ", or pass wait_s=0 to only record the request")
        with _as_chronicle_errors(self.url):
            return controls.cancel(self._existing, session, wait_s=wait_s, actor=actor).row()

    @checked
    async def cancel_async(self, session: SessionRef, wait_s: Seconds = 10.0, actor: str | None = None) -> dict[str, Any]:
        """`cancel`, awaited: the wait for the turn to end runs on a thread of its own, so the event loop goes on, and
        a turn it runs (this Chronicle's `run` in another task) sees the cancel, records it and ends."""
        with _as_chronicle_errors(self.url):
            store = self._existing
            return (await off_the_loop(controls.cancel, store, session, wait_s, controls.CANCEL_REASON, actor)).row()

    @checked
    async def compact_async(self, session: SessionRef, strategy: str = "summary", keep: FromZero | None = None) -> dict[str, Any]:
        """`compact --json`: older turns summarised (a model call), truncated, or moved to the workspace's memory."""
        with _as_chronicle_errors(self.url):
            sid = queries.session_id(self._existing, session)
            return (await controls.compact(self._existing, sid, strategy, keep)).row(sid)

    def compact(self, session: SessionRef, strategy: str = "summary", keep: int | None = None) -> dict[str, Any]:
        """`compact_async`, blocking (not inside an event loop)."""
        return blocking("compact", "compact_async", lambda: self.compact_async(session, strategy, keep))

    # -- time travel -----------------------------------------------------------------------------

    @checked
    def undo(self, session: SessionRef, turns: FromOne = 1, files: bool = False, actor: str | None = None, *,
             workspace: str | Path | None = None) -> dict[str, Any]:
        """`undo --json`: `session_id`, `undone`, `files` (`[]` without `files`). `workspace`: where the session's files
        are now, if not where it recorded (`undo --files --workspace DIR`)."""
        with _as_chronicle_errors(self.url):
            done = timetravel.undo(self._existing, session, turns, files=files, actor=actor,
                                   workspace=Path(workspace).expanduser() if workspace else None)
        _warn_refused("undo", done.session_id, done.refused, self.url)
        return done.row()

    @checked
    def redo(self, session: SessionRef, actor: str | None = None, *, files: bool = False) -> dict[str, Any]:
        """Put the last undone turns back; with `files`, their files too (`redo --files`). `redo --json`: the shape of
        `undo`'s (`files` is `[]` without `files`), with `warning` when there is one."""
        with _as_chronicle_errors(self.url):
            done = timetravel.redo(self._existing, session, actor=actor, files=files)
        _warn_refused("redo", done.session_id, done.refused, self.url)
        return done.row()

    @checked
    def fork(self, session: SessionRef, at: FromOne | None = None, actor: str | None = None) -> str:
        """A new session continuing from turn `at` (default: the end of the branch); its id. `actor`: who forked, as
        recorded in its `forked_from` (default: this process's user@host or CHRONICLE_ACTOR)."""
        with _as_chronicle_errors(self.url):
            child = timetravel.fork(self._existing, session, at, actor=actor)
            if (note := timetravel.undone_note(self._existing, child)) is not None:
                warn(note)  # what the CLI says in its note: line
            return str(child.id)

    # -- serving ---------------------------------------------------------------------------------

    def http_app(self, *agents: Agent, workspace: str | Path | None = None, token: str | None = None,
                 run_worker: bool = True, worker_concurrency: int | None = None) -> FastAPI:
        """`chronicle serve` as an ASGI app (the `server` extra) whose `POST /sessions` can also start
        these code-defined agents by name (`"agent": NAME`): `uvicorn.run(Chronicle().http_app(a, b))`.
        `worker_concurrency`: `serve --concurrency` (None: 4); with `run_worker=False` a ChronicleError (code 2)."""
        from chronicle.runtime.server.api import ServerConfig, create_app

        if workspace is not None and not isinstance(workspace, (str, Path)):  # the rest is checked by create_app, strictly
            raise DefinitionError(f"http_app(): workspace: expected a directory (str or Path), got {workspace!r}")
        return create_app(ServerConfig(db=self.url, workspace=Path(workspace).expanduser().resolve() if workspace else None,
                                       token=token, run_worker=run_worker, worker_concurrency=worker_concurrency,
                                       library=tuple(agents)))

    @checked
    async def replay_async(self, session: SessionRef, workspace: str | Path | None = None) -> dict[str, Any]:
        """`replay --json`: whether the session runs again exactly as recorded, and the first divergence if not."""
        with _as_chronicle_errors(self.url):
            sid = queries.session_id(self._existing, session)
            report = await timetravel.replay(self._existing, sid, Path(workspace) if workspace else None)
        return timetravel.replay_row(sid, report)

    def replay(self, session: SessionRef, workspace: str | Path | None = None) -> dict[str, Any]:
        """`replay_async`, blocking (not inside an event loop)."""
        return blocking("replay", "replay_async", lambda: self.replay_async(session, workspace))

    # -- queries ---------------------------------------------------------------------------------

    @checked
    def sessions(self, all: bool = False) -> list[dict[str, Any]]:
        """`sessions --json`; archived sessions (and their sub-agents) only with `all`, as `sessions --all`."""
        with _as_chronicle_errors(self.url):
            return queries.sessions(self._existing, archived=all)

    @checked
    def model(self, session: SessionRef) -> dict[str, Any]:
        """`model SESSION --json`: the model (and thinking budget) the session's next turn uses, and who last changed it."""
        with _as_chronicle_errors(self.url):
            return model_change.current(self._existing, session).row()

    @checked
    def set_model(self, session: SessionRef, model: ModelName, thinking_tokens: FromZero | None = None,
                  actor: str | None = None) -> dict[str, Any]:
        """`model SESSION NAME [--thinking N] --json`: record that the session runs on `model` from its next turn
        (a running turn keeps its own: `applies_from` says "next_turn"). `thinking_tokens`: 0 off, else 1024 to
        below max_tokens; None keeps the recorded budget. A bad name or budget is ChronicleError 2, nothing recorded."""
        with _as_chronicle_errors(self.url):
            return model_change.change_model(self._existing, session, model, thinking_tokens, actor=actor).row()

    @checked
    def archive(self, session: SessionRef, actor: str | None = None) -> dict[str, Any]:
        """`archive --json`: hide an idle session from `sessions()` (recorded; `sessions(all=True)` still lists it)."""
        with _as_chronicle_errors(self.url):
            return {"session_id": str(archiving.archive(self._existing, session, actor)), "archived": True}

    @checked
    def unarchive(self, session: SessionRef, actor: str | None = None) -> dict[str, Any]:
        """`unarchive --json`: list an archived session again."""
        with _as_chronicle_errors(self.url):
            return {"session_id": str(archiving.unarchive(self._existing, session, actor)), "archived": False}

    @checked
    def log(self, session: SessionRef, tree: bool = False) -> list[dict[str, Any]]:
        with _as_chronicle_errors(self.url):
            return queries.log(self._existing, session, tree=tree)

    @checked
    def tasks(self, session: SessionRef) -> list[dict[str, Any]]:
        """`tasks SESSION --json`: the session's task board, tasks added to it first, then those its delegate calls opened."""
        with _as_chronicle_errors(self.url):
            return task_cases.listing(self._existing, session)

    @checked
    def notes(self, session: SessionRef, at: FromOne | None = None) -> list[dict[str, Any]]:
        """`notes SESSION [--at TURN] --json`: the shared notes of the session's tree of agents (seed 004), each as last
        written: `name`, `text`, `session_id` and `tool_call_id` of the write, `written_at`. With `at`, as they stood
        when turn `at` ended (counted as `history(at=)` counts turns; a fork's start with those of its last inherited turn)."""
        from chronicle.runtime.app.notes import notes_of

        with _as_chronicle_errors(self.url):
            return notes_of(self._existing, session, at)

    @checked
    def add_task(self, session: SessionRef, task: str, agent: str | None = None) -> dict[str, Any]:
        """`tasks add SESSION TEXT [--agent NAME] --json`: put a task on the session's board ahead of delegation; its
        row (`task_id`, `status` pending, `child_session_id` null). A `delegate` task item naming that `task_id`
        claims it for the child it starts. `agent`: only that agent may claim it. An empty task or an agent the
        session may not delegate to is ChronicleError 2, nothing recorded."""
        with _as_chronicle_errors(self.url):
            return task_cases.add(self._existing, session, task, agent)

    @checked
    def history(self, session: SessionRef, at: FromOne | None = None, version: FromOne | None = None,
                step: FromZero | None = None) -> list[dict[str, Any]]:
        """The conversation in Anthropic's wire format: next (no moment), at the end of turn `at`, at the
        session's `version`-th event, or as the model was sent it for `step` (from 0) of turn `at`."""
        with _as_chronicle_errors(self.url):
            return queries.history(self._existing, session, at=at, version=version, step=step)

    @checked
    def cost(self, session: SessionRef | None = None, by: str | None = None) -> list[dict[str, Any]]:
        with _as_chronicle_errors(self.url):
            return queries.cost(self._existing, session, by=by)

    @checked
    def audit(self, session: SessionRef | None = None, tool: str | None = None, errors: bool = False, since: str | None = None,
              limit: RowCount | None = None, last: RowCount | None = None) -> list[dict[str, Any]]:
        """`audit --json`: `limit` the first entries, `last` the newest (both in commit order; not both)."""
        with _as_chronicle_errors(self.url):
            return queries.audit(self._existing, session=session, tool=tool, errors=errors, since=since, limit=limit,
                                 last=last)

    # -- proof and erasure ----------------------------------------------------------------------

    @checked
    def verify(self, session: SessionRef | None = None) -> dict[str, Any]:
        """`verify [SESSION] --json`: the hash chain re-computed over the whole log, or what one session tree's
        conversation is read from. A broken chain is the answer (`ok` false, `broken` naming the first bad link),
        not an error, as `replay` reports a divergence."""
        from chronicle.runtime.verify import Verifier, session_to_verify

        with _as_chronicle_errors(self.url):
            verifier = Verifier(self._existing)
            if session is None:
                return verifier.verify_all(None).as_json()
            return verifier.verify_session(session_to_verify(self._existing, session), None).as_json()

    @checked
    def export(self, session: SessionRef, sign_with: bytes | str | None = None) -> dict[str, Any]:
        """`export SESSION [--sign KEY]`: the session tree's bundle as data (what `export -o` writes as JSON), signed
        with an Ed25519 private key in PEM when `sign_with` is given; `import_bundle` loads it into another store."""
        with _as_chronicle_errors(self.url):
            return bundles.export(self._existing, session, sign_with.encode() if isinstance(sign_with, str) else sign_with)

    @checked
    def import_bundle(self, bundle: dict[str, Any] | str | bytes, key: bytes | str | None = None,
                      actor: str | None = None) -> dict[str, Any]:
        """`import FILE [--key KEY] --json`: verify the bundle (the object `export` gave, or its JSON) and load it in one
        transaction. `key`: an Ed25519 key in PEM (public or private); only a bundle it signed is taken. A tampered,
        wrongly signed or already imported bundle raises ChronicleError 1 and records nothing. `actor`: who imports it,
        as the import's provenance records (default: this process's user@host or CHRONICLE_ACTOR)."""
        with _as_chronicle_errors(self.url):
            return bundles.import_(self.store, bundle, bundles.trusted_key(key.encode() if isinstance(key, str) else key),
                                   actor=actor)

    @checked
    def forget(self, session: SessionRef, actor: str | None = None) -> dict[str, Any]:
        """`forget SESSION --yes --json`: erase the session's tree (sub-agents and forks) for good by destroying its data
        key; needs a store created with CHRONICLE_CIPHER_KEY (ChronicleError 2 otherwise). There is no confirmation
        here: the call is the decision. The events stay, unreadable, and `verify` still passes."""
        with _as_chronicle_errors(self.url):
            return forgetting.forget(self._existing, session, actor=actor).as_json()

    @checked
    def why(self, session: SessionRef, call: str | None = None, turn: FromOne | None = None) -> dict[str, Any]:
        """Why the agent made one decision (`chronicle why --json`): what it was asked, what it saw, what it
        decided, what was checked, what it did and what came next, with the log positions that record each.
        `call`: a tool_use id, a tool call id or prefix, or a tool's name (its last call); default the last
        tool call. `turn` alone: that turn's last model decision."""
        with _as_chronicle_errors(self.url):
            return decisions.why(self._existing, session, call, turn=turn)
