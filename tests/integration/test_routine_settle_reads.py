"""A worker's routine tick reads what is not settled, on both backends: a tick with nothing new loads no
routine run, a run another process fired between ticks is settled all the same, and a restarted engine
starts from the settled checkpoint instead of every run ever fired."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.routine_run import RoutineRun
from chronicle.runtime.loop import AgentLoop, LoopOptions
from chronicle.runtime.providers.scripted import ScriptedProvider
from chronicle.runtime.routine_engine import RoutineEngine
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.toolsets import toolbox_for
from tests.counting_store import CountingStore
from tests.helpers import response, text, write_script

TOML = ('[routines.tick]\ntrigger = "cron:*/5 * * * *"\nprompt = "tick"\naction = "job"\n\n'
        '[routines.report]\ntrigger = "manual"\nprompt = "Report."\naction = "job"\n')
SLOT = datetime(2026, 3, 2, 9, 5, 10, tzinfo=UTC)  # 09:05:10: the 09:05 slot is due


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at


def _setup(workspace: Path, tmp_path: Path) -> Path:
    (workspace / "chronicle.toml").write_text(TOML, encoding="utf-8")
    done = [response(text("All done."))]
    return write_script(tmp_path / "s.json", [], **{"routine-tick": done, "routine-report": done})


def _engine(store: ChronicleStore, workspace: Path, script: Path, clock: Clock, holder: str = "w") -> RoutineEngine:
    spec = AgentSpec(name="main", provider=f"scripted:{script}", model="scripted", workspace=str(workspace))
    return RoutineEngine.for_workspace(store, workspace, spec, holder, clock)


def _run_turn(store: ChronicleStore, workspace: Path, script: Path, run: RoutineRun) -> None:
    loop = AgentLoop(store, ScriptedProvider(script), toolbox_for(()), workspace, options=LoopOptions())
    asyncio.run(loop.run_next(run.session_id))


def _report(engine: RoutineEngine, due: str) -> RoutineRun:
    run = engine.fire(next(r for r in engine.routines if r.name == "report"), due)
    assert run is not None
    return run


def test_a_tick_with_nothing_new_loads_no_routine_run(db_url, workspace, tmp_path):
    script = _setup(workspace, tmp_path)
    store = CountingStore(db_url)
    clock = Clock(SLOT - timedelta(seconds=30))
    worker = _engine(store, workspace, script, clock)
    clock.at = SLOT
    [slot] = worker.tick()
    running = _report(worker, "manual/running")  # its turn never runs here: it stays unsettled
    _run_turn(store, workspace, script, slot)
    assert worker.tick() == []
    assert store.repository.get(slot.id).status == "completed"
    store.loads.clear()
    clock.at = SLOT + timedelta(seconds=20)
    assert worker.tick() == [] and worker.tick() == []
    assert store.loads["RoutineRun"] == 0, "neither the slot fired already nor any run is loaded again"
    assert store.repository.get(running.id).status == "fired"


def test_a_run_another_process_fired_between_ticks_is_settled(db_url, workspace, tmp_path):
    script = _setup(workspace, tmp_path)
    store = ChronicleStore(db_url)
    worker = _engine(store, workspace, script, Clock(SLOT - timedelta(minutes=3)))
    assert worker.tick() == []
    elsewhere = ChronicleStore(db_url)  # `routines run` or a second worker: its own process and store
    other = _report(_engine(elsewhere, workspace, script, Clock(SLOT), holder="other"), "manual/elsewhere")
    _run_turn(elsewhere, workspace, script, other)
    reader = ChronicleStore(db_url)
    assert reader.repository.get(other.id).status == "fired"
    worker.tick()
    settled = reader.repository.get(other.id)
    assert (settled.status, settled.summary) == ("completed", "All done.")


def test_a_restarted_engine_loads_no_run_settled_before(db_url, workspace, tmp_path):
    script = _setup(workspace, tmp_path)
    store = ChronicleStore(db_url)
    worker = _engine(store, workspace, script, Clock(SLOT - timedelta(minutes=3)))
    runs = [_report(worker, f"manual/{i}") for i in range(4)]
    for run in runs[:3]:
        _run_turn(store, workspace, script, run)
    assert [r.id for r in worker.settle()] == [r.id for r in runs[:3]]
    restarted_store = CountingStore(db_url)
    restarted = _engine(restarted_store, workspace, script, Clock(SLOT - timedelta(minutes=3)))
    assert restarted.tick() == [] and restarted.settle() == []
    assert restarted_store.loads["RoutineRun"] == 1, "only the run not settled yet"
    _run_turn(store, workspace, script, runs[3])
    assert [r.id for r in restarted.settle()] == [runs[3].id]
    again = CountingStore(db_url)
    assert _engine(again, workspace, script, Clock(SLOT)).settle() == []
    assert again.loads["RoutineRun"] == 0
