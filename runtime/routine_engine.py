"""Firing routines: claim the due time, check the guardrails, queue the input, settle the run.

A firing is one transaction: the RoutineRun (its id derived from routine + due time, so a
second worker's identical firing collides and records nothing), its index entry, and the
input queued on the session that will run it. The run itself is an ordinary turn, so workers
execute it, resume continues it after a crash, and audit shows it. `lightweight` routines
keep one session per routine and add an input per run (their findings accumulate there);
`job` routines start a new session per run. A lightweight routine's session that `chronicle forget`
erased can take no input any more (its tree refuses every write): the next run starts the routine's
session anew, under the next id of the routine's sequence (`routine_session_id`, so workers that
both see the erasure create the same one and the second write collides), and that run records the
session it replaces (`RoutineRun.Fired`'s `replaces_session_id`).

Cron slots are fired when due since the engine started (less `GRACE_S`), so a restarted
worker neither replays old slots nor misses one due a moment ago. Event triggers watch the
log from the engine's start; events of routine sessions themselves never trigger a routine.

Settling reads only what may still need it: the engine keeps the runs it has seen fired but not
settled, and each tick reads the index entries written since its last one (one query, empty when
nothing fired) and the turns of the runs it keeps; a run is loaded again only once its turn has
ended. Where it starts is a checkpoint of the workspace's in the store (index_checkpoints.py),
advanced below the first run not settled, so a restarted worker does not read every run ever fired.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any
from uuid import UUID, uuid5

from eventsourcing.application import AggregateNotFoundError, EventSourcedLog
from eventsourcing.domain import DomainEvent
from eventsourcing.persistence import IntegrityError

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.errors import DomainError
from chronicle.domain.ids import CHRONICLE_NS, turn_id
from chronicle.domain.routine_run import RoutineRun
from chronicle.domain.session import Session

from .clock import SYSTEM_CLOCK, Clock
from .index_checkpoints import CheckpointedRead
from .pending import Pending
from .read_models import projection_engine
from .routines import HEARTBEAT_OK, Routine, heartbeat_prompt, load_routines
from .sessions import queue_scanned
from .shred_marks import forgotten_cause
from .shredding import forgotten
from .store import ChronicleStore, NotFound

#: What `RoutineEngine._lookup` gives for an aggregate `chronicle forget` erased: its id is taken, its content gone.
ERASED = object()

#: Tries to record one firing, each after a write that collided with another writer's.
FIRE_TRIES = 10


class FiringNotRecorded(RuntimeError):
    """A routine's firing that could not be recorded: the look that wanted it ends, and the next one tries again."""

ROUTINES_NS = uuid5(CHRONICLE_NS, "/routines")
ROUTINE_RUN_INDEX_ID = uuid5(CHRONICLE_NS, "/routine-runs")
GRACE_S = 60.0
#: Index entries a guard reads at a time, newest first.
GUARD_PAGE = 100
SESSION_PREFIX = "routine-"


class RoutineRunLogged(DomainEvent):
    run_id: UUID
    routine: str
    scope: str


def run_id(scope: str, routine: str, due: str) -> UUID:
    return uuid5(ROUTINES_NS, f"{scope}\n{routine}\n{due}")


def routine_session_id(scope: str, routine: str, generation: int = 0) -> UUID:
    """A lightweight routine's session: the first one, or the `generation`-th started after erasures."""
    name = f"{scope}\n{routine}\nsession" + (f"\n{generation}" if generation else "")
    return uuid5(ROUTINES_NS, name)


@dataclass(frozen=True)
class ErasedRun:
    """A run `chronicle forget` erased with its session: all of it that can still be read is its routine index
    entry (the run's id, its routine, when it was indexed: as it fired) and its tree's row in the key table (which
    session, and when it was forgotten). What it was asked and found is gone, as the erasure meant."""

    id: UUID
    routine: str
    #: The erased session tree's id: the routine's session (a routine session is never a sub-agent or a fork).
    session_id: UUID
    fired_at: datetime
    erased_at: str | None
    #: A skipped run names no session, so it is of no tree and is never erased: an erased run ran, and the
    #: guardrails count it (max_runs_per_day, cooldown_s; its spend is erased with it).
    status = "erased"


@dataclass
class RoutineEngine:
    store: ChronicleStore
    workspace: Path
    #: The spec a routine's new session records (renamed routine-NAME); None for an engine that only reads.
    spec: AgentSpec | None
    holder: str
    clock: Clock = SYSTEM_CLOCK
    routines: list[Routine] = field(default_factory=list)
    started_at: datetime | None = None
    cursor: int | None = None
    #: Settling's reading of the routine index (from its checkpoint, then where it stopped), and the runs
    #: seen fired and not settled (run id -> index position, session, input).
    settle_read: CheckpointedRead | None = None
    unsettled: dict[UUID, tuple[int, UUID, str]] = field(default_factory=dict)
    #: routine -> the last run this engine knows was fired (by anyone): a cron slot is not looked up again
    #: at every tick until the next one is due.
    known_fired: dict[str, UUID] = field(default_factory=dict)
    #: routine -> how many of its lightweight sessions this engine has seen erased (see `kept_session`).
    generations: dict[str, int] = field(default_factory=dict)
    #: Why a session started with `spec` could not run here (no model provider, say), or None: a firing that would
    #: start one is skipped with this reason instead, since the session would wait for good (app/routines.engine).
    unstartable: str | None = None

    @classmethod
    def for_workspace(cls, store: ChronicleStore, workspace: Path, spec: AgentSpec, holder: str, clock: Clock = SYSTEM_CLOCK) -> RoutineEngine:
        engine = cls(store, workspace.resolve(), spec, holder, clock, load_routines(workspace))
        engine.started_at = clock.now()
        engine.cursor = store.max_position()
        return engine

    @property
    def scope(self) -> str:
        return str(self.workspace)

    @property
    def index(self) -> EventSourcedLog[RoutineRunLogged]:
        return EventSourcedLog(self.store.events, ROUTINE_RUN_INDEX_ID, RoutineRunLogged)

    # -- reading -------------------------------------------------------------------------------

    def _lookup(self, aggregate_id: UUID) -> Any:
        """The aggregate, None if there is none, or ERASED if `chronicle forget` erased it with its session's tree."""
        try:
            return self.store.repository.get(aggregate_id)
        except AggregateNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - an erased aggregate's events no longer decode
            if forgotten_cause(exc) is None:
                raise
            return ERASED

    def _run(self, run_id: UUID) -> RoutineRun | None:
        """The run, or None if there is none, or if `chronicle forget` erased it with its session's tree."""
        run = self._lookup(run_id)
        return run if isinstance(run, RoutineRun) else None

    def _entry_run(self, entry: RoutineRunLogged) -> RoutineRun | ErasedRun | None:
        """The run an index entry names; what is left of it if `chronicle forget` erased it; None if there is none."""
        try:
            run: Any = self.store.repository.get(entry.run_id)
        except AggregateNotFoundError:
            return None
        except Exception as exc:  # noqa: BLE001 - an erased run's events no longer decode
            erased = forgotten_cause(exc)
            if erased is None:
                raise
            return ErasedRun(entry.run_id, entry.routine, erased.tree, entry.timestamp, erased.at)
        return run if isinstance(run, RoutineRun) else None

    def history(self, routine: str | None = None) -> list[RoutineRun | ErasedRun]:
        """This workspace's runs in firing order, those `chronicle forget` erased with their session among them."""
        runs: list[RoutineRun | ErasedRun] = []
        for entry in self.index.get():
            if entry.scope != self.scope or (routine is not None and entry.routine != routine):
                continue
            run = self._entry_run(entry)
            if run is not None:
                runs.append(run)
        return runs

    def _turn(self, run: RoutineRun) -> Any:
        if run.session_id is None or run.input_id is None:
            return None
        try:
            return self.store.turn(turn_id(run.session_id, run.input_id))
        except NotFound:
            return None

    def cost(self, run: RoutineRun | ErasedRun) -> float:
        """What the run spent; 0 for an erased one, whose calls were erased from the cost projection with it."""
        if isinstance(run, ErasedRun):
            return 0.0
        if run.finished:
            return run.usd
        turn = self._turn(run)
        return self._turn_usd(turn) if turn is not None else 0.0

    def _turn_usd(self, turn: Any) -> float:
        """USD of one turn from the cost projection, the one path to a cost figure."""
        engine = projection_engine(self.store)
        engine.catch_up(["cost"])
        with engine.read() as tx:
            return float(tx.value("SELECT SUM(COALESCE(usd, 0)) FROM proj_cost_calls WHERE turn_id = %s", (str(turn.id),)) or 0)

    def guard(self, routine: Routine, now: datetime) -> str | None:
        """Why the routine may not run now, or None."""
        if routine.max_runs_per_day is None and routine.cooldown_s is None and routine.budget_usd is None:
            return None  # nothing to check: its past runs are not read
        ran = [r for r in self._recent_runs(routine, now) if r.status != "skipped"]
        today = [r for r in ran if r.fired_at.date() == now.date()]
        if routine.max_runs_per_day is not None and len(today) >= routine.max_runs_per_day:
            return f"max_runs_per_day reached: {len(today)} run(s) today, the limit is {routine.max_runs_per_day}"
        if routine.cooldown_s is not None and ran:
            since = (now - max(r.fired_at for r in ran)).total_seconds()
            if since < routine.cooldown_s:
                return f"cooldown: the last run was {since:.0f} s ago, cooldown_s is {routine.cooldown_s:g}"
        if routine.budget_usd is not None:
            spent = sum(self.cost(r) for r in today)
            if spent >= routine.budget_usd:
                return f"budget_usd reached: ${spent:.4f} spent today, the budget is ${routine.budget_usd:.4f}"
        return None

    def _recent_runs(self, routine: Routine, now: datetime) -> list[RoutineRun | ErasedRun]:
        """The routine's runs a guard can need, newest first: today's, and back to the last one that was
        not skipped or to the end of its cooldown. A guard read every run the routine ever fired at each
        firing; the index is read a page at a time from its end, and runs are in firing order there."""
        found: list[RoutineRun | ErasedRun] = []
        upper: int | None = None
        ran = False  # a run not skipped seen: the last one the cooldown counts from
        while True:
            page = list(self.index.get(desc=True, lte=upper, limit=GUARD_PAGE))
            for entry in page:
                if entry.scope != self.scope or entry.routine != routine.name:
                    continue
                run = self._entry_run(entry)  # an erased run ran all the same (a skipped one is of no session's tree)
                if run is None:
                    continue
                found.append(run)
                ran = ran or run.status != "skipped"
                if run.fired_at.date() < now.date():
                    cooled = routine.cooldown_s is None or (now - run.fired_at).total_seconds() >= routine.cooldown_s
                    if ran or cooled:
                        return found  # older runs are neither today's nor the last one the cooldown counts from
            if len(page) < GUARD_PAGE:
                return found
            upper = page[-1].originator_version - 1

    # -- firing --------------------------------------------------------------------------------

    def fire(self, routine: Routine, due: str, detail: str | None = None) -> RoutineRun | None:
        """Record the firing of `routine` for `due`; None if that due time was fired already (by anyone).
        FiringNotRecorded when every try collided: returning None then said "fired already" of a firing that
        never was (a cron tick moved on; an event's firing was lost for good)."""
        rid = run_id(self.scope, routine.name, due)
        if self.known_fired.get(routine.name) == rid:
            return None
        for _ in range(FIRE_TRIES):
            if self._exists(rid):
                self.known_fired[routine.name] = rid
                return None
            now = self.clock.now()
            reason = self.guard(routine, now)
            prompt: str | None = routine.prompt
            if routine.heartbeat:
                prompt = heartbeat_prompt(routine, self.workspace)
                if prompt is None and reason is None:
                    reason = "HEARTBEAT.md is missing or has nothing to check"
            if prompt and detail:
                prompt += f"\n\n<trigger>{detail}</trigger>"
            input_id = f"routine-{rid.hex[:16]}"
            try:
                sid, erased = self.kept_session(routine) if routine.action == "lightweight" else (uuid5(rid, "session"), None)
                exists = reason is None and self._session_exists(sid)
                if reason is None and not exists and self.unstartable is not None:
                    reason = f"its session could not run: {self.unstartable}"
                run = RoutineRun(
                    id=rid, routine=routine.name, scope=self.scope, trigger=routine.trigger, due=due, action=routine.action,
                    holder=self.holder, session_id=None if reason else sid, input_id=None if reason else input_id, timestamp=now,
                    notify=None if reason else routine.notify,  # decided now: a later `notify` leaves this run's findings alone
                    replaces_session_id=None if reason or exists else erased,
                )
                logged = self.index.trigger_event(run_id=rid, routine=routine.name, scope=self.scope)
                if reason is not None:
                    run.skip(reason, now)
                    self.store.save(run, logged)
                elif exists:
                    queue = functools.partial(queue_scanned, input_id=input_id, text=prompt or "", now=now, kind="routine")
                    self.store.update_session(sid, queue, run, Pending(logged))
                else:
                    session = Session.start(sid, self._spec(routine), now)
                    queue_scanned(session, input_id, prompt or "", now, kind="routine")
                    self.store.create_session(session, run, Pending(logged))
                self.known_fired[routine.name] = rid
                return run
            except IntegrityError:
                continue  # the run was fired by someone else (checked above), or an index slot was taken: look again
            except DomainError:
                # Another worker fired this slot between our look and our write, and its input is
                # already queued on the routine's session: that firing is the one that counts.
                if self._exists(rid):
                    self.known_fired[routine.name] = rid
                    return None
                raise
            except Exception as exc:  # noqa: BLE001 - the kept session was erased since we looked (by another process)
                if not getattr(exc, "forgotten", False) and forgotten_cause(exc) is None:
                    raise
                continue  # the refused write dropped its key here: the next look starts the routine's session anew
        raise FiringNotRecorded(f"routine {routine.name}: its firing for {due} could not be recorded after {FIRE_TRIES} tries "
                                "(each write collided with another writer's); nothing was recorded for it, and the next look "
                                "tries again")

    def session_to_continue(self, routine: Routine) -> Session | None:
        """The session a firing of `routine` now would queue its input on (a lightweight routine's, once started), or None
        when it would start one."""
        if routine.action != "lightweight":
            return None
        sid, _ = self.kept_session(routine)
        found = self._lookup(sid)
        return found if isinstance(found, Session) else None

    def kept_session(self, routine: Routine) -> tuple[UUID, UUID | None]:
        """A lightweight routine's session, and the erased one it follows (None: none was erased).

        The routine's first session, unless `chronicle forget` erased it; then the next of its sequence, and so on:
        one look per erased session, each remembered by this process (`TreeKeys` keeps a forgotten tree as such)."""
        generation = self.generations.get(routine.name, 0)
        sid = routine_session_id(self.scope, routine.name, generation)
        erased = routine_session_id(self.scope, routine.name, generation - 1) if generation else None
        while forgotten(self.store.mapper, sid):
            generation, erased = generation + 1, sid
            sid = routine_session_id(self.scope, routine.name, generation)
        self.generations[routine.name] = generation
        return sid, erased

    def _spec(self, routine: Routine) -> AgentSpec:
        if self.spec is None:
            raise RuntimeError("this routine engine only reads; it has no spec to start sessions with")
        update: dict[str, Any] = {"name": f"{SESSION_PREFIX}{routine.name}", "workspace": self.scope}
        if routine.heartbeat:  # a checklist run every half hour: the cheaper auxiliary model, when one is set, recorded as its model
            update["model"] = self.spec.auxiliary_model(self.spec.model)
        return self.spec.model_copy(update=update)

    def _exists(self, aggregate_id: UUID) -> bool:
        """Whether the id is taken: by an aggregate, or by one `chronicle forget` erased (a run of a cron slot
        erased with its session was fired all the same, and an erased session can be written no more)."""
        return self._lookup(aggregate_id) is not None

    def _session_exists(self, sid: UUID) -> bool:
        return self._exists(sid)

    # -- settling ------------------------------------------------------------------------------

    def settle(self) -> list[RoutineRun]:
        """Record the end of every run whose turn has ended, and let go of those `chronicle forget` erased.

        An erased run is of its session's tree, so nothing can be written on it any more (the store refuses
        a write to a forgotten tree); the erasure is its record (SessionForgotten, which `audit` shows), and
        it counts as settled: kept waiting, it would hold the checkpoint below it for good."""
        self._read_unsettled()
        settled = []
        for rid, (_, sid, input_id) in sorted(self.unsettled.items(), key=lambda item: item[1][0]):
            try:
                turn = self.store.turn(turn_id(sid, input_id))
            except NotFound:  # not started yet, or erased (ForgottenSession, or a turn that never started)
                if forgotten(self.store.mapper, sid):
                    del self.unsettled[rid]
                continue
            if not turn.finished:
                continue
            run = self._run(rid)
            if run is None or run.finished:
                del self.unsettled[rid]  # settled by another process, or erased
                continue
            usd = self._turn_usd(turn)
            now = self.clock.now()
            if turn.status == "completed":
                text = (turn.final_text or "").strip()
                run.complete("nothing to report" if routine_ok(text) else text, usd, now)
            else:
                run.fail(f"the run's turn {turn.status}: {turn.reason or 'no reason recorded'}", usd, now)
            try:
                self.store.save(run)
                settled.append(run)
            except IntegrityError:
                pass  # settled by another process
            except Exception as exc:  # noqa: BLE001 - refused: erased since it was read (the key was still in memory)
                if forgotten_cause(exc) is None:
                    raise
            del self.unsettled[rid]
        if self.settle_read is not None:
            self.settle_read.advance_below(position for position, _, _ in self.unsettled.values())
        return settled

    def _read_unsettled(self) -> None:
        """The index entries since the last look: the runs among them not settled yet are kept."""
        if self.settle_read is None:
            self.settle_read = CheckpointedRead(self.store, ROUTINE_RUN_INDEX_ID, "settled", self.scope)
        for entry in self.settle_read.new(self.index):
            if entry.scope != self.scope:
                continue
            run = self._run(entry.run_id)  # None: erased, so settled (see `settle`)
            if run is not None and not run.finished and run.session_id is not None and run.input_id is not None:
                self.unsettled[run.id] = (entry.originator_version, run.session_id, run.input_id)

    # -- the worker's tick ---------------------------------------------------------------------

    def tick(self) -> list[RoutineRun]:
        """Fire what is due (cron slots, matching events), then settle finished runs."""
        now = self.clock.now()
        fired: list[RoutineRun] = []
        since = (self.started_at or now) - timedelta(seconds=GRACE_S)
        for routine in self.routines:
            if routine.kind == "cron":
                slot = routine.current_slot(now)
                if slot is not None and slot >= since:
                    run = self.fire(routine, f"cron/{slot.isoformat()}")
                    if run is not None:
                        fired.append(run)
        fired.extend(self._fire_events())
        self.settle()
        return fired

    def _fire_events(self) -> list[RoutineRun]:
        watching = [r for r in self.routines if r.kind == "event"]
        head = self.store.max_position()
        start = (self.cursor or 0) + 1
        if not watching or head < start:
            self.cursor = head
            return []
        fired = []
        for notification in self.store.recorder.select_notifications(start, head - start + 1):
            name = notification.topic.rsplit(":", 1)[-1]
            matching = [r for r in watching if fnmatchcase(name, r.pattern)]
            if not matching or self._from_routine(notification.originator_id, name):
                continue
            detail = f"{name} of {notification.originator_id} at log position {notification.id}"
            for routine in matching:
                run = self.fire(routine, f"event/{notification.id}", detail)
                if run is not None:
                    fired.append(run)
            # Past an event once its firings are recorded: one that could not be (FiringNotRecorded ends the tick)
            # is looked at again by the next tick, and a routine it fired already is not fired twice (run ids are its).
            self.cursor = notification.id
        self.cursor = head
        return fired

    def _from_routine(self, originator_id: Any, name: str) -> bool:
        """Events of a routine's own session or turns do not trigger routines (no feedback loops)."""
        oid = UUID(str(originator_id))
        try:
            if name.startswith("Turn."):
                oid = self.store.turn(oid).session_id
            elif name.startswith("ToolCall."):
                oid = self.store.tool_call(oid).session_id
            return self.store.session(oid).spec.name.startswith(SESSION_PREFIX)
        except NotFound:
            return False


def routine_ok(text: str) -> bool:
    return text.strip().strip(".").upper() == HEARTBEAT_OK


def run_row(engine: RoutineEngine, run: RoutineRun | ErasedRun) -> dict[str, Any]:
    """`routines history --json` / `routines run --json`: routine, session_id, status are the contract.

    `erased_at`: when `chronicle forget` erased the run with its session (status `erased`; what it recorded is
    gone, so its trigger, due, action, holder and usd are null and its summary empty). `replaces_session_id`: the
    erased session a lightweight routine's run started the routine's session anew in place of."""
    if isinstance(run, ErasedRun):
        return {
            "routine": run.routine, "run_id": str(run.id), "session_id": str(run.session_id), "status": "erased",
            "trigger": None, "due": None, "action": None, "fired_at": run.fired_at.isoformat(), "holder": None,
            "reason": f"erased with its session by `chronicle forget`{f' on {run.erased_at}' if run.erased_at else ''} "
                      "(`chronicle audit` shows by whom)",
            "summary": "", "usd": None, "notify": None, "replaces_session_id": None, "erased_at": run.erased_at,
        }
    turn = engine._turn(run)
    status = run.status
    if status == "fired":
        status = "queued" if turn is None or turn.status == "pending" else ("running" if not turn.finished else turn.status)
    return {
        "routine": run.routine, "run_id": str(run.id), "session_id": str(run.session_id) if run.session_id else None,
        "status": status, "trigger": run.trigger, "due": run.due, "action": run.action, "fired_at": run.fired_at.isoformat(),
        "holder": run.holder, "reason": run.reason, "summary": run.summary or (turn.final_text if turn is not None and turn.finished else ""),
        "usd": round(engine.cost(run), 6), "notify": getattr(run, "notify", None),
        "replaces_session_id": str(run.replaces_session_id) if getattr(run, "replaces_session_id", None) else None,
        "erased_at": None,
    }
