"""Routines as use cases: list, run one now, history, and a worker's tick. `chronicle routines`, the
worker and the Python API (`Chronicle.routines`, `run_routine`, `routine_history`, `tick_routines`)
call these, with routines from the workspace's chronicle.toml or defined in code (`Routine` objects,
checked exactly as a [routines.NAME] table is)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any
from uuid import uuid4

from ..agents.registry import AgentRegistry
from ..clock import SYSTEM_CLOCK, Clock
from ..loop import LoopOptions
from ..routine_engine import FiringNotRecorded, RoutineEngine, run_row
from ..routines import Routine, RoutineError, check_notify, load_routines, parse_routine
from ..store import ChronicleStore
from .errors import AppError
from .loops import LoopSetupError, build_loop, loop_parts
from .specs import new_spec, normalise_provider
from .worker import advance_session, worker_name


def checked(routine: Routine) -> Routine:
    """A Routine made in code, checked as its chronicle.toml table would be (RoutineError names the field)."""
    table = {k: v for k, v in asdict(routine).items() if k != "name" and v is not None}
    if not routine.heartbeat:
        table.pop("heartbeat")
    if routine.trigger == "":  # left out, as a table leaves the key out: a heartbeat's default, else "trigger is required"
        table.pop("trigger")
    return parse_routine(routine.name, table, "Routine")


def routines_of(workspace: Path, routines: Sequence[Routine] | None = None) -> list[Routine]:
    """The routines given in code, or else the workspace's chronicle.toml ones."""
    if routines is None:
        return load_routines(workspace)
    found = [checked(r) for r in routines]
    names = [r.name for r in found]
    if len(set(names)) != len(names):
        raise RoutineError("two routines have the same name; give each its own")
    check_notify(workspace, found)
    return found


def listing(workspace: Path, routines: Sequence[Routine] | None = None, clock: Clock = SYSTEM_CLOCK) -> list[dict[str, Any]]:
    """`routines list --json`: name, trigger, action, next_due (cron only), and the rest of the definition."""
    now = clock.now()
    return [r.row(now) for r in routines_of(workspace, routines)]


def find(workspace: Path, name: str, routines: Sequence[Routine] | None = None) -> Routine:
    found = routines_of(workspace, routines)
    routine = next((r for r in found if r.name == name), None)
    if routine is None:
        config = workspace / "chronicle.toml"
        where = ("the routines given" if routines is not None else str(config) if config.is_file()
                 else f"{workspace} (it has no chronicle.toml to define [routines.NAME] in)")
        raise RoutineError(f"no routine named {name!r} in {where}; routines: {', '.join(r.name for r in found) or 'none'}")
    return routine


def engine(store: ChronicleStore, workspace: Path, provider: str | None = None, model: str | None = None,
           registry: AgentRegistry | None = None, routines: Sequence[Routine] | None = None,
           clock: Clock = SYSTEM_CLOCK) -> RoutineEngine:
    """The engine with the spec a routine's session records: the main agent (the workspace's, or `registry`'s) as a new
    session gets it, renamed routine-NAME."""
    spec = new_spec(workspace, normalise_provider(provider), model, registry=registry)
    fired = RoutineEngine.for_workspace(store, workspace, spec, worker_name(), clock)
    if routines is not None:
        fired.routines = routines_of(workspace, routines)
    try:  # as `run` checks a new session (no provider, a script that is not there), once, not per firing
        loop_parts(spec, provider_name=spec.provider or None, model=model, workspace=workspace)
    except LoopSetupError as exc:
        fired.unstartable = str(exc)
    return fired


def refuse_unrunnable(store: ChronicleStore, fired: RoutineEngine, routine: Routine, provider: str | None, model: str | None,
                      workspace: Path) -> None:
    """A manual firing whose session could not run here is refused (exit 2) before anything is recorded, as `run`
    refuses a new session: recorded, its input would wait for good, and `resume --all` would fail on it every time
    (a worker's tick records such a firing as skipped instead, saying why: RoutineEngine.unstartable)."""
    session = fired.session_to_continue(routine)
    if session is None and fired.unstartable is not None:
        raise AppError(f"routine {routine.name}: nothing recorded, its session could not run: {fired.unstartable}", 2)
    if session is not None:
        try:
            loop_parts(session.spec, session=session, provider_name=normalise_provider(provider), model=model, workspace=workspace)
        except LoopSetupError as exc:
            raise AppError(f"routine {routine.name}: nothing recorded: {exc}", 2) from None


async def run(store: ChronicleStore, workspace: Path, routine: Routine | str, *, provider: str | None = None,
              model: str | None = None, auto_approve: bool = False, registry: AgentRegistry | None = None,
              routines: Sequence[Routine] | None = None) -> dict[str, Any]:
    """Fire the routine now, its guardrails (max_runs_per_day, budget_usd, cooldown_s) applied: a lightweight one runs here
    in its own session, a job is queued for a worker. `routines run --json`'s row: routine, session_id, status."""
    chosen = routines_of(workspace, [routine])[0] if isinstance(routine, Routine) else find(workspace, routine, routines)
    fired = engine(store, workspace, provider, model, registry)
    refuse_unrunnable(store, fired, chosen, provider, model, workspace)
    try:
        run_ = fired.fire(chosen, f"manual/{uuid4().hex}")
    except FiringNotRecorded as exc:
        raise AppError(str(exc), 1) from None
    assert run_ is not None  # a fresh due key cannot have been fired before
    if run_.status == "fired" and chosen.action == "lightweight" and run_.session_id is not None:
        def make_loop(session: Any) -> Any:
            try:
                return build_loop(store, session, provider_name=normalise_provider(provider), model=model, workspace=workspace,
                                  options=LoopOptions(auto_approve=auto_approve))
            except LoopSetupError as exc:
                raise AppError(str(exc), 2) from None

        await advance_session(store, run_.session_id, make_loop, fired.holder, auto_approve=auto_approve)
        fired.settle()
        run_ = store.repository.get(run_.id)
    return run_row(fired, run_)


def unused_approval(row: dict[str, Any], auto_approve: bool, given: str = "--yes") -> str | None:
    """The note for auto_approve (`routines run --yes`; `given`: how the client calls it) given to a routine whose run
    is a job: a worker runs it, and approves only if it was started with --yes, so the flag decided nothing. None when
    it applied or nothing ran."""
    if not auto_approve or row.get("action") != "job" or not row.get("session_id"):
        return None
    return (f"note: {given} ignored: routine {row['routine']} is a job, queued for a worker, which approves as it was "
            "started (`chronicle worker --yes`)")


def history(store: ChronicleStore, workspace: Path, routine: str | None = None) -> list[dict[str, Any]]:
    """`routines history --json`: every firing of the workspace's routines, oldest first."""
    reader = RoutineEngine(store, workspace.resolve(), spec=None, holder="")  # reading only: nothing is fired
    return [run_row(reader, r) for r in reader.history(routine)]


def tick(fired: RoutineEngine) -> list[dict[str, Any]]:
    """What a worker does before each look for work: fire the due cron slots and the routines whose events were recorded
    since the engine's last tick (each at most once per due time across all processes), then settle finished runs.
    Keep one engine across ticks: a cron slot is due from the engine's start (less a minute's grace), and events from
    its last tick. The fired runs' rows; a worker runs their sessions (a lightweight run's turn, a job's session)."""
    return [run_row(fired, r) for r in fired.tick()]
