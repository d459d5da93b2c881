"""Continuing sessions without a person: `resume` once, or `worker` processes that poll.

Work is found through the store's session index: a session needs work when it has a turn in
flight (a crash, a lost connection, an approval that was answered) or queued inputs. Each
session is advanced under its lease (runtime/leases.py), one turn after another, oldest input
first, so inputs of one session run FIFO while different sessions run concurrently.
"""

from __future__ import annotations

import asyncio
import contextlib
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable
from uuid import UUID

from eventsourcing.persistence import IntegrityError, PersistenceError

from chronicle.domain.session import Session

from ..clock import SYSTEM_CLOCK, Clock
from ..import_paths import LiveObjects, bound, has_bound, using
from ..jobs import cancelled as job_cancelled
from ..leases import DEFAULT_LEASE_S, held_elsewhere, holder_name, leased
from ..live import Broker
from ..loop import AgentLoop, LoopOptions, TurnOutcome
from ..off_loop import off_the_loop
from ..pasteable import pasteable
from ..process_stop import stopping_message
from ..redaction import redact_secrets
from ..session_work import needs_work
from ..settings import LimitFlags
from ..store import ChronicleStore
from ..store_open import store_gone, told_at_once_when_refused
from ..work_index import WorkIndex
from .errors import cause_line, first_line
from .loops import LoopSetupError, build_loop
from .worker_progress import WorkerProgress

#: Outcomes after which a session is left alone until something changes.
PAUSING = ("awaiting_approval", "interrupted", "conflict")


#: What a look for work, a lease or a self-repair pass can fail with when the store cannot be reached: the store's own
#: errors, and the system's (out of file descriptors: EMFILE from the driver's login, a SQLite file that cannot be
#: opened). Either is logged, backed off and retried; an OSError escaped the worker and stopped it, with every turn it ran.
STORE_FAILURES = (PersistenceError, OSError)

#: Seconds a crashing worker gives its turns to record that they are left in flight (`Worker.run`).
LEAVE_S = 5.0

#: Seconds before a worker tries again a session whose lease another worker held.
HELD_RETRY_S = 1.0

#: A session that cannot be continued as recorded; the message says what to pass.
ResumeError = LoopSetupError


def worker_name() -> str:
    return holder_name()


def cancelled_before_start(store: ChronicleStore, record: Session) -> str | None:
    """A job cancelled while queued is never started (`jobs cancel`): its input stays in the log, visibly not run.
    Workers skip it; `resume` (one session or --all) ran it all the same, and the job stayed listed `cancelled`."""
    if record.active_turn_id is None and record.queue and job_cancelled(store, record.id):
        return f"job {record.id} was cancelled before it started (jobs cancel); its queued input is not run"
    return None



@dataclass
class Overrides:
    provider: str | None = None
    model: str | None = None
    workspace: Path | None = None
    options: LoopOptions = field(default_factory=LoopOptions)
    limits: LimitFlags = field(default_factory=LimitFlags)


def loop_for_session(store: ChronicleStore, session: Session, overrides: Overrides, broker: Broker | None = None,
                     say: Callable[[str], Any] | None = None) -> AgentLoop:
    """The loop for a stored session: what it recorded (provider, model, workspace) unless overridden,
    with the same guards and compaction as `run` (limits from the flags, then the workspace's chronicle.toml).
    `say` hears the notes of what it does not use (build_loop)."""
    return build_loop(
        store, session, provider_name=overrides.provider, model=overrides.model, workspace=overrides.workspace,
        options=overrides.options, limits=overrides.limits, broker=broker, say=say,
    )


async def advance_session(
    store: ChronicleStore, session_id: UUID, make_loop: Callable[[Session], AgentLoop], holder: str,
    lease_s: float = DEFAULT_LEASE_S, should_stop: Callable[[], bool] = lambda: False, auto_approve: bool = False,
    say: Callable[[str], Any] | None = None,
) -> list[TurnOutcome] | None:
    """Run the session's turns until nothing is left or it pauses; None if another holder has it. The files an
    interrupted undo/redo --files owes are finished first, under the same lease, as `resume` does (`say` hears it)."""
    outcomes: list[TurnOutcome] = []
    async with leased(store, session_id, holder, lease_s) as keeper:
        if keeper is None:
            return None
        loop: AgentLoop | None = None
        first = True
        while not should_stop() and not keeper.lost:
            session = store.session(session_id)
            if first and session.files_owed:
                finished = await off_the_loop(owed_files_finished, store, session_id, True)
                if finished and say is not None:
                    say(finished)
                session = store.session(session_id)
            first = False
            if needs_work(store, session, auto_approve) is None or cancelled_before_start(store, session) is not None:
                break  # a job cancelled while its turn ran: that turn ended cancelled, its queued inputs never start
            loop = loop or make_loop(session)
            try:
                outcome = await loop.run_next(session_id)
            except IntegrityError:
                break  # someone else wrote first; whoever holds the session continues it
            if outcome is None:
                break
            outcomes.append(outcome)
            if outcome.status in PAUSING:
                break
        if loop is not None and outcomes and session.parent_session_id is not None:
            from ..agents.children import settle_resumed

            await settle_resumed(store, session, loop.hooks, loop.clock.now())
    return outcomes


def owed_files_finished(store: ChronicleStore, session_id: UUID, held: bool = False) -> str | None:
    """What finishing the session's owed files did (runtime/files_owed.py), as one line; None if it owed none.
    `held`: the caller holds the session's lease (a worker), else the finish takes it. One it cannot finish (its
    workspace is gone) is said, and the session's turns run all the same."""
    from ..files_owed import finish_owed
    from ..timetravel import TimeTravelError

    try:
        done = finish_owed(store, session_id, held=held)
    except TimeTravelError as exc:
        return f"session {session_id}: {exc}"
    return done.message if done is not None else None


@dataclass
class WorkerOptions:
    concurrency: int = 4
    poll_s: float = 0.5
    lease_s: float = DEFAULT_LEASE_S
    idle_exit_s: float | None = None
    once: bool = False


#: A session whose advance failed unexpectedly is retried after 5 s, then 10, 20, … up to 5 minutes.
BACKOFF_BASE_S = 5.0
BACKOFF_CAP_S = 300.0


class Worker:
    """Polls for sessions needing work and advances up to `concurrency` of them at a time."""

    def __init__(self, store: ChronicleStore, overrides: Overrides, options: WorkerOptions,
                 log: Callable[[str], Any] = print, name: str | None = None, routines: Any = None,
                 clock: Clock = SYSTEM_CLOCK) -> None:
        self.store, self.overrides, self.options, self.clock = store, overrides, options, clock
        #: Where the lines go: stderr for `chronicle worker` and `chronicle serve`, a logger in a program.
        self.sink = log
        #: A runtime.routine_engine.RoutineEngine: due routines queue their inputs before each look for work.
        self.routines = routines
        #: A runtime.self_repair.SelfRepair, run every `repair_every_s`; sessions it marks manual_required are left alone.
        self.repair: Any = None
        self.repair_every_s = 10.0
        self._repaired_at: float | None = None
        self.name = name or worker_name()
        self.draining = False
        #: The running loop and the event `drain` sets: it ends the idle wait between looks for work (`_run`).
        self._woken: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None
        self.tasks: dict[UUID, asyncio.Task] = {}
        self.outcomes: list[TurnOutcome] = []
        self.failed_sessions: set[UUID] = set()
        self.index = WorkIndex(store, overrides.options.auto_approve)
        #: Sessions whose lease another worker held when this one tried, and when: not retried
        #: at every poll (each try is a lease read and a losing write).
        self.held_elsewhere: dict[UUID, float] = {}
        self.left_alone: set[UUID] = set()
        #: Sessions whose advance raised something unexpected: (retry not before, failures so far).
        #: Left for a doubling delay instead of being picked up again at the next poll.
        self.backing_off: dict[UUID, tuple[float, int]] = {}
        self.named_unreadable: set[UUID] = set()
        #: The setup notes already logged (`_say_once`).
        self.said: set[str] = set()
        #: The words of the store failure last logged, until a look for work succeeds again (`_store_unavailable`).
        self.store_down: str | None = None
        #: The failure said was a write's (advancing a session): a look for work, a read, does not show it is over. A full
        #: disk fails every write and no read, and the log said "available again" at each look, then the failure again:
        #: nine lines a second for as long as the disk stayed full. Only a write that succeeds says so now.
        self.down_writing = False
        #: Why the worker stopped on its own (its store gone: `store_open.store_gone`): `run` then returns 1.
        self.stopped_because: str | None = None
        #: How far it has looked for work (worker_progress.py): the server's /healthz says it.
        self.progress = WorkerProgress()
        #: Asked at every look for work; once it says yes the worker drains (finishes the turns in hand) and exits:
        #: a program's threading.Event (`Chronicle.work(stop=...)`), where the CLI has its signals.
        self.stop_when: Callable[[], bool] | None = None

    def log(self, line: str) -> None:
        """One line of the worker's log, secrets masked: a turn's reason, a failure's cause and a setup note carry words
        from elsewhere (an exception, a provider's error, a script), and the log is read where the store's secrets must
        not be. Tool arguments are never put in a line (a turn's outcome names its status and reason only)."""
        self.sink(redact_secrets(line))

    def _say_once(self, note: str) -> None:
        """A note about a session's setup (an ignored setting, a tool no longer offered), logged the first time only:
        the worker builds a loop each time it takes the session up again, and the note does not change."""
        if note not in self.said:
            self.said.add(note)
            self.log(f"worker {self.name}: {note}")

    def _store_unavailable(self, exc: BaseException, where: str = "", writing: bool = False) -> None:
        """A store failure, logged when its words are new. A lost database fails every look for work alike (twice a
        second, once its refusal is told at once: runtime/pg_datastore.py), and the log said the same line each time;
        it now says it once (by its first line: the driver adds the statement), and then that the store answers again."""
        words = redact_secrets(first_line(exc))  # the driver's words: no secret reaches the log
        if store_gone(self.store) is not None:
            return  # no retry cures it: the next pass stops the worker and says why (`run`)
        self.down_writing = self.down_writing or writing
        if words != self.store_down:
            self.store_down = words
            self.log(f"worker {self.name}: store unavailable{where}: {words}; will retry")

    def _store_back(self, wrote: bool) -> None:
        """The store answered again: said once, and after a write if what failed was one (`down_writing`)."""
        if self.store_down is None or (self.down_writing and not wrote):
            return
        self.store_down, self.down_writing = None, False
        self.log(f"worker {self.name}: store available again")

    def drain(self) -> None:
        """Finish the turns in hand, take no new ones, then exit."""
        if not self.draining:
            self.log(f"worker {self.name}: draining (finishing {len(self.tasks)} session(s) in hand)")
        self.draining = True
        if self._woken is not None:  # an idle worker sleeps a whole --poll between looks (up to a day): wake it now
            loop, woken = self._woken
            with contextlib.suppress(RuntimeError):  # its loop has closed: it has stopped already
                loop.call_soon_threadsafe(woken.set)

    def abandon(self, why: str) -> None:
        """Before a process stops at once (a second signal, a drain that ran out of time): the commands its tools run
        are killed with their process groups rather than left running with parent 1, and the log says what is left
        to the sessions' leases. The turns stay in flight, recorded as far as they got; no outcome is made up."""
        from ..tools.shell import kill_running_commands

        killed = kill_running_commands()
        self.log(f"worker {self.name}: {why}; {killed} running command(s) killed; the {len(self.tasks)} session(s) in hand "
                 "are left to their leases (another worker, or `chronicle resume`, continues them)")

    async def _advance(self, sid: UUID) -> None:
        try:
            with using(objects_of(self.store, sid)):
                outcomes = await advance_session(
                    self.store, sid, lambda s: loop_for_session(self.store, s, self.overrides, say=self._say_once), self.name,
                    self.options.lease_s, should_stop=lambda: self.draining, auto_approve=self.overrides.options.auto_approve,
                    say=lambda note: self.log(f"worker {self.name}: {note}"),
                )
        except ResumeError as exc:
            self.failed_sessions.add(sid)
            self.log(f"worker {self.name}: skipping session {sid}: {exc}")
            self.record_failure(sid, str(exc), 1, None)
            return
        except STORE_FAILURES as exc:
            self._store_unavailable(exc, f" while advancing {sid}", writing=True)
            await asyncio.sleep(self.options.poll_s)
            return
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - one session's unexpected failure must not stop or spin the worker
            self._back_off(sid, exc)
            return
        self.backing_off.pop(sid, None)
        # Its lease was written and its turns' events: the store takes writes again, unless a turn lost it on the way
        # (`interrupted`: left in flight, runtime/turn_outcome.py), which says so in its own line.
        self._store_back(wrote=outcomes is not None and all(o.status != "interrupted" for o in outcomes))
        if outcomes is None:
            self.held_elsewhere[sid] = asyncio.get_running_loop().time()
        for outcome in outcomes or []:
            self.outcomes.append(outcome)
            self.log(f"worker {self.name}: session {sid} turn {outcome.turn_id} {outcome.status}"
                     + (f": {outcome.reason}" if outcome.reason else ""))

    def _fire_routines(self) -> None:
        try:
            for run in self.routines.tick():
                self.log(f"worker {self.name}: routine {run.routine} fired for {run.due}: {run.status}"
                         + (f" ({run.reason})" if run.reason else f", session {run.session_id}")
                         + (f" (new: the routine's session {run.replaces_session_id} was erased)"
                            if getattr(run, "replaces_session_id", None) else ""))
        except STORE_FAILURES as exc:
            self._store_unavailable(exc, " while firing routines")
        except Exception as exc:  # noqa: BLE001 - a routine that cannot fire must not stop the sessions' work
            self.log(f"worker {self.name}: routines not fired this time ({cause_line(exc)}); will retry")

    def _self_repair(self, at: float) -> None:
        if self._repaired_at is not None and at - self._repaired_at < self.repair_every_s:
            return
        self._repaired_at = at
        try:
            for repair in self.repair.check():
                last = repair.attempts[-1]
                self.log(f"worker {self.name}: self-repair {repair.kind} {repair.target}: {last['result']}: {last['detail']}")
        except STORE_FAILURES as exc:
            self._store_unavailable(exc, " during self-repair")

    def _eligible(self, sid: UUID) -> bool:
        """Not held by a live run, not blocked by self-repair, not a cancelled job at rest; a session whose
        checks raise is backed off like one whose advance raised, never fatal to the worker. A cancelled job whose
        turn is still in flight (its worker died before it saw the cancel) is taken, so that its turn ends
        cancelled: left alone, it stayed in flight for good, listed `cancelling`."""
        try:
            return (not self._held_by_live(sid) and not (self.repair is not None and self.repair.blocked(sid))
                    and not (job_cancelled(self.store, sid) and self.store.session(sid).active_turn_id is None))
        except STORE_FAILURES:
            raise
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - one session's failure is that session's
            self._back_off(sid, exc)
            return False

    def _name_unreadable(self) -> None:
        for sid, message in self.index.unreadable.items():
            if sid not in self.named_unreadable:
                self.named_unreadable.add(sid)
                self.log(f"worker {self.name}: leaving session {sid} out: {message}")

    def _back_off(self, sid: UUID, exc: BaseException) -> None:
        failures = self.backing_off.get(sid, (0.0, 0))[1] + 1
        delay = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** (failures - 1))
        self.backing_off[sid] = (asyncio.get_running_loop().time() + delay, failures)
        cause = cause_line(exc)
        self.log(f"worker {self.name}: session {sid} failed unexpectedly ({cause}); failure {failures}, leaving it for {delay:g} s")
        self.record_failure(sid, cause, failures, delay)

    def record_failure(self, sid: UUID, error: str, failures: int, retry_in_s: float | None) -> None:
        """Record on the session what went wrong (secrets masked), so `log` and `audit` show it; if
        even that cannot be written (the store is down, the session unreadable), the log line stands."""
        try:
            text = redact_secrets(error)
            now = self.clock.now()
            self.store.update_session(sid, lambda s: s.record_worker_failure(self.name, text, failures, retry_in_s, now))
        except Exception as exc:  # noqa: BLE001 - recording a failure must not become the next failure
            self.log(f"worker {self.name}: could not record the failure of session {sid}: {type(exc).__name__}")

    def _held_by_live(self, sid: UUID) -> bool:
        """A live `run`, `chat` or worker holds the session: leave it alone (say so once)."""
        lease = held_elsewhere(self.store, sid, self.name)
        if lease is None:
            self.left_alone.discard(sid)
            return False
        if sid not in self.left_alone:
            self.left_alone.add(sid)
            self.log(f"worker {self.name}: leaving session {sid} alone: {lease.holder} holds it")
        return True

    async def run(self) -> int:
        """Look for work and advance it until told to stop (or idle, or `--once` done); 1 if the store went for good.
        Should it fail all the same, its turns are left in flight (`_leave_in_flight`), never ended as cancelled.
        A cancel of the worker itself (Ctrl-C during `Chronicle.work()`, a task cancelled by its program) is a person's
        or a program's: its turns record that cancel, as every blocking call's do (README)."""
        try:
            return await self._run()
        except Exception as exc:
            await self._leave_in_flight(exc)
            raise

    async def _leave_in_flight(self, exc: Exception) -> None:
        """The worker stops on a failure of its own: the turns it runs are cancelled with a message that says so
        (runtime/process_stop.py), so that each stays in flight, recorded as far as it got, for its lease, as after
        a second SIGTERM (`abandon`). Left to `asyncio.run`, they were cancelled with no reason, which the loop records
        as the user's cancel: every turn of a worker that ran out of file descriptors ended "cancelled by the user"."""
        running = [task for task in self.tasks.values() if not task.done()]
        if not running:
            return
        why = f"the worker failed: {cause_line(exc)}"
        self.abandon(why)
        for task in running:
            task.cancel(stopping_message(why))
        await asyncio.wait(running, timeout=LEAVE_S)

    async def _idle(self, seconds: float) -> None:
        """Wait `seconds` for the next look, or until `drain`: a drained idle worker with `--poll 600` stayed asleep
        for the rest of its poll after saying "draining", and only a second signal stopped it."""
        assert self._woken is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._woken[1].wait(), timeout=seconds)

    async def _run(self) -> int:
        loop = asyncio.get_running_loop()
        self._woken = (loop, asyncio.Event())
        if self.draining:
            self._woken[1].set()
        idle_since = loop.time()
        self.log(f"worker {self.name}: started (concurrency {self.options.concurrency}, lease {self.options.lease_s:g} s)")
        while True:
            if self.stop_when is not None and not self.draining and self.stop_when():
                self.drain()
            if not self.draining and (gone := store_gone(self.store)) is not None:
                self.stopped_because = str(gone)  # no save can land and no new work can be seen: a restart is the cure
                self.log(f"worker {self.name}: stopping: {gone}")
                self.drain()
            for sid, task in list(self.tasks.items()):
                if task.done():
                    del self.tasks[sid]
            found: list[UUID] = []
            if not self.draining and self.routines is not None:
                self._fire_routines()
            # Off the event loop's thread, as the scan below: a pass that reads many sessions must not hold the turns
            # this worker is running (their streams, tools and lease renewals).
            if not self.draining and self.repair is not None:
                await off_the_loop(self._self_repair, loop.time())
            if not self.draining:
                looked: BaseException | None = None  # why this look for work failed, if it did
                try:
                    now = loop.time()
                    busy = {s for s, at in self.held_elsewhere.items() if now - at < HELD_RETRY_S}
                    busy |= {s for s, (until, _) in self.backing_off.items() if now < until}
                    with_work = await off_the_loop(self.index.sessions)  # a full rescan reads every session
                    candidates = [s for s in self.index.spread(with_work, self.name)
                                  if s not in self.tasks and s not in self.failed_sessions and s not in busy]
                    self._name_unreadable()
                    # Checked only until the free slots are filled: each check reads the session's
                    # lease and job state, and a worker with 4 slots polled 40 sessions' worth at
                    # every turn end (more workers, more of them, all on the same few rows).
                    free = max(0, self.options.concurrency - len(self.tasks))
                    for sid in candidates:
                        if len(found) >= free:
                            break
                        if self._eligible(sid):
                            found.append(sid)
                except STORE_FAILURES as exc:
                    self._store_unavailable(exc)
                    looked = exc
                for sid in found:
                    self.tasks[sid] = asyncio.ensure_future(self._advance(sid))
                if looked is None:
                    self._store_back(wrote=False)
                    self.progress.completed(len(self.tasks))
                else:
                    self.progress.failed(looked)
            if self.tasks or found:
                idle_since = loop.time()
            elif self.draining or self.options.once:
                break
            elif self.options.idle_exit_s is not None and loop.time() - idle_since >= self.options.idle_exit_s:
                break
            if self.tasks:
                await asyncio.wait(list(self.tasks.values()), timeout=self.options.poll_s, return_when=asyncio.FIRST_COMPLETED)
            else:
                await self._idle(self.options.poll_s)
        self.log(f"worker {self.name}: stopped after {len(self.outcomes)} turn(s)")
        return 1 if self.stopped_because else 0


def workspace_routines(store: ChronicleStore, overrides: Overrides, holder: str, say: Callable[[str], Any]) -> Any:
    """The routines of the worker's workspace (its override, else the current directory), or None if it declares none.
    `say` hears, once, that routines which notify are fired here but their findings posted only by a `serve`."""
    from ..routines import load_routines
    from . import routines
    from .specs import resolve_workspace

    ws = overrides.workspace or resolve_workspace(None)
    declared = load_routines(ws)
    if not declared:
        return None
    notifying = sorted(r.name for r in declared if r.notify)
    if notifying:
        serve = pasteable(f"serve --workspace {shlex.quote(str(ws))}", store.url)
        say(f"notify: this worker does not post findings ({', '.join(notifying)}); `{serve}` does")
    engine = routines.engine(store, ws, overrides.provider, overrides.model)
    engine.holder = holder
    return engine


def compose_worker(store: ChronicleStore, overrides: Overrides, options: WorkerOptions, *, log: Callable[[str], Any],
                   stuck_after_s: float, tool_failures: int, say: Callable[[str], Any] | None = None) -> Worker:
    """The worker `chronicle worker` runs and `Chronicle.work` runs in a program: the workspace's routines fired before
    each look for work, self-repair watching for stuck turns and broken tools. One composition, so the two cannot drift."""
    told_at_once_when_refused(store)  # a lost database named in half a second, not after ten pool timeouts
    worker = Worker(store, overrides, options, log=log)
    worker.routines = workspace_routines(store, overrides, worker.name, say or log)
    return repairing(worker, stuck_after_s=stuck_after_s, tool_failures=tool_failures)


def repairing(worker: Worker, *, stuck_after_s: float | None = None, tool_failures: int | None = None) -> Worker:
    """The worker with self-repair watching for stuck turns and broken tools, from the log's end on: every worker has it
    (`chronicle worker`, `Chronicle.work`, `chronicle serve`'s), as docs/deployment.md says; defaults as the command's."""
    from ..self_repair import DEFAULT_STUCK_AFTER_S, DEFAULT_TOOL_FAILURES, SelfRepair

    worker.repair = SelfRepair(worker.store, stuck_after_s=DEFAULT_STUCK_AFTER_S if stuck_after_s is None else stuck_after_s,
                               tool_failures=DEFAULT_TOOL_FAILURES if tool_failures is None else tool_failures,
                               cursor=worker.store.max_position())
    return worker


def objects_of(store: Any, sid: UUID) -> LiveObjects | None:
    """The objects of the Agent a session (or the session above it, for a sub-agent's) was run with in this process,
    while that Agent lives: resuming it here, after an approval say, runs them rather than whatever else was defined
    under their import paths since (import_paths.LiveObjects). None where no Agent ran it here (another process)."""
    if not has_bound():
        return None
    from ..agents.children import find_session

    ids: list[UUID] = []
    parent: UUID | None = sid
    while parent is not None and parent not in ids:
        ids.append(parent)
        found = find_session(store, parent)
        parent = found.parent_session_id if found is not None else None
    return bound(ids)
