"""A worker's routine tick reads what is not settled, on both backends: a tick with nothing new loads no
routine run, a run another process fired between ticks is settled all the same, and a restarted engine
starts from the settled checkpoint instead of every run ever fired."""

from __future__ import annotations

import asyncio
import base64
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.routine_run import RoutineRun
from chronicle.runtime.app.forget import forget
from chronicle.runtime.loop import AgentLoop, LoopOptions
from chronicle.runtime.providers.scripted import ScriptedProvider
from chronicle.runtime.routine_engine import ErasedRun, RoutineEngine
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.toolsets import toolbox_for
from tests.closed_at_end import closed_at_end
from tests.counting_store import CountingStore
from tests.fixed_clock import Clock
from tests.helpers import response, text, write_script

TOML = ('[routines.tick]\ntrigger = "cron:*/5 * * * *"\nprompt = "tick"\naction = "job"\n\n'
        '[routines.report]\ntrigger = "manual"\nprompt = "Report."\naction = "job"\n')
SLOT = datetime(2026, 3, 2, 9, 5, 10, tzinfo=UTC)  # 09:05:10: the 09:05 slot is due


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
    store = closed_at_end(ChronicleStore(db_url))
    worker = _engine(store, workspace, script, Clock(SLOT - timedelta(minutes=3)))
    assert worker.tick() == []
    elsewhere = closed_at_end(ChronicleStore(db_url))  # `routines run` or a second worker: its own process and store
    other = _report(_engine(elsewhere, workspace, script, Clock(SLOT), holder="other"), "manual/elsewhere")
    _run_turn(elsewhere, workspace, script, other)
    reader = closed_at_end(ChronicleStore(db_url))
    assert reader.repository.get(other.id).status == "fired"
    worker.tick()
    settled = reader.repository.get(other.id)
    assert (settled.status, settled.summary) == ("completed", "All done.")


def test_a_restarted_engine_loads_no_run_settled_before(db_url, workspace, tmp_path):
    script = _setup(workspace, tmp_path)
    store = closed_at_end(ChronicleStore(db_url))
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


@pytest.fixture
def cipher(monkeypatch):
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", base64.b64encode(os.urandom(32)).decode())


@pytest.mark.parametrize("when", ["before its turn started", "after its turn ended"])
def test_a_run_whose_session_was_erased_before_it_settled_holds_the_checkpoint_no_more(db_url, workspace, tmp_path, cipher, when):
    """`chronicle forget` erased the run's session, and the run with it (it is of the session's tree): it can
    settle no more, and the erasure (SessionForgotten, in `audit`) is its record; the checkpoint moves past it,
    so a restarted worker reads neither it nor the runs below the checkpoint."""
    script = _setup(workspace, tmp_path)
    store = closed_at_end(ChronicleStore(db_url))
    worker = _engine(store, workspace, script, Clock(SLOT - timedelta(minutes=3)))
    erased = _report(worker, "manual/erased")
    done = _report(worker, "manual/done")
    assert worker.settle() == []  # both seen, neither settled
    if when == "after its turn ended":
        _run_turn(store, workspace, script, erased)
    _run_turn(store, workspace, script, done)
    forget(closed_at_end(ChronicleStore(db_url)), erased.session_id)  # elsewhere: `chronicle forget`
    store.mapper.keys.clock = lambda: float("inf")  # past the bounded staleness of a cached key (`TreeKeys.fresh_for`)
    assert [r.id for r in worker.settle()] == [done.id]
    assert worker.unsettled == {}, "the erased run is let go"
    restarted_store = CountingStore(db_url)
    restarted = _engine(restarted_store, workspace, script, Clock(SLOT))
    assert restarted.settle() == [] and restarted.unsettled == {}
    assert restarted_store.loads["RoutineRun"] == 0, "the checkpoint is past both runs"
    assert restarted_store.rows_read[erased.id] == 0


def test_a_worker_started_after_a_runs_session_was_erased_ticks_and_moves_its_checkpoint_past_it(db_url, workspace, tmp_path, cipher):
    """The run cannot be read any more: a worker that meets it first in the index passes it by as settled,
    instead of failing its routine tick (and so firing no routine) at every look."""
    script = _setup(workspace, tmp_path)
    store = closed_at_end(ChronicleStore(db_url))
    erased = _report(_engine(store, workspace, script, Clock(SLOT)), "manual/erased")
    forget(store, erased.session_id)
    fresh = _engine(closed_at_end(ChronicleStore(db_url)), workspace, script, Clock(SLOT - timedelta(seconds=30)))
    assert fresh.tick() == [] and fresh.unsettled == {}
    [shown] = fresh.history()  # `routines history` shows it was there and was erased, nothing of its content
    assert isinstance(shown, ErasedRun) and (shown.id, shown.session_id) == (erased.id, erased.session_id)
    again = CountingStore(db_url)
    assert _engine(again, workspace, script, Clock(SLOT)).settle() == []
    assert again.rows_read[erased.id] == 0, "the checkpoint is past it"
