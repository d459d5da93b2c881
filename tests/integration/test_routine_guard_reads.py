"""A guarded routine's firing reads today's runs and the last one its cooldown counts from, not every
run the routine ever fired: a routine with `max_runs_per_day`, `cooldown_s` or `budget_usd` that fires
every few minutes has thousands of runs after a month, and each firing loaded them all. Both backends."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.routine_engine import RoutineEngine
from tests.counting_store import CountingStore
from tests.fixed_clock import Clock

TODAY = datetime(2026, 3, 5, 12, 0, tzinfo=UTC)


def _engine(store: CountingStore, workspace: Path, toml: str, clock: Clock) -> RoutineEngine:
    (workspace / "chronicle.toml").write_text(toml, encoding="utf-8")
    spec = AgentSpec(name="main", provider="scripted:/nowhere.json", model="scripted", workspace=str(workspace))
    return RoutineEngine.for_workspace(store, workspace, spec, "w", clock)


def _fire_days_of_runs(engine: RoutineEngine, clock: Clock, days: int, per_day: int) -> None:
    """Runs on each of the `days` days before TODAY, fired by the routine without its limits (all run)."""
    [routine] = engine.routines
    free = dataclasses.replace(routine, max_runs_per_day=None, cooldown_s=None, budget_usd=None)
    for day in range(days, 0, -1):
        for n in range(per_day):
            clock.at = TODAY - timedelta(days=day) + timedelta(hours=n)
            run = engine.fire(free, f"manual/{day}-{n}")
            assert run is not None and run.status == "fired"


def test_a_daily_limit_reads_todays_runs_and_no_older_one(db_url, workspace):
    store = CountingStore(db_url)
    clock = Clock(TODAY)
    engine = _engine(store, workspace, '[routines.r]\ntrigger = "manual"\nprompt = "p"\naction = "job"\nmax_runs_per_day = 2\n', clock)
    [routine] = engine.routines
    _fire_days_of_runs(engine, clock, days=6, per_day=3)
    clock.at = TODAY
    assert engine.guard(routine, TODAY) is None
    engine.fire(routine, "manual/today-1")
    store.loads.clear()
    assert engine.guard(routine, TODAY) is None  # one run today, the limit is two
    assert store.loads["RoutineRun"] == 2, "today's run and the newest older one, which ends the read"
    engine.fire(routine, "manual/today-2")
    assert engine.guard(routine, TODAY) == "max_runs_per_day reached: 2 run(s) today, the limit is 2"


def test_a_cooldown_reads_back_to_the_last_run_it_counts_from_past_skipped_ones(db_url, workspace):
    store = CountingStore(db_url)
    clock = Clock(TODAY)
    toml = '[routines.r]\ntrigger = "manual"\nprompt = "p"\naction = "job"\ncooldown_s = 172800\n'  # two days
    engine = _engine(store, workspace, toml, clock)
    [routine] = engine.routines
    _fire_days_of_runs(engine, clock, days=5, per_day=2)  # the last one fired 23 hours ago
    store.loads.clear()
    reason = engine.guard(routine, TODAY)
    assert reason == "cooldown: the last run was 82800 s ago, cooldown_s is 172800"
    assert store.loads["RoutineRun"] == 1, "the newest run is the last one the cooldown counts from"
    clock.at = TODAY
    skipped = engine.fire(routine, "manual/now")  # refused by the cooldown: recorded as skipped
    assert skipped is not None and skipped.status == "skipped"
    store.loads.clear()
    assert engine.guard(routine, TODAY) == reason  # the skipped run does not restart the cooldown
    assert store.loads["RoutineRun"] == 2, "past the skipped run to the last one that ran"
