"""The outbox's notices read the routine index from a checkpoint the store keeps, on both backends: a
restarted server loads no run whose findings were posted before, and a run still waiting below the
runs posted since is found and posted when its turn ends."""

from __future__ import annotations

import asyncio
import base64
import os
from pathlib import Path
from typing import Any

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.routine_run import RoutineRun
from chronicle.runtime.app.forget import forget
from chronicle.runtime.loop import AgentLoop, LoopOptions
from chronicle.runtime.providers.scripted import ScriptedProvider
from chronicle.runtime.routine_engine import RoutineEngine
from chronicle.runtime.server.channels import load_channels
from chronicle.runtime.server.outbox import Outbox, Outcome
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.toolsets import toolbox_for
from tests.closed_at_end import closed_at_end
from tests.counting_store import CountingStore
from tests.helpers import response, text, write_script

TOML = ('[channels.ops]\nreply_url = "http://127.0.0.1:9/in"\n\n'
        '[routines.report]\ntrigger = "manual"\nprompt = "Report."\naction = "job"\nnotify = "ops"\n')


def _fired(store: ChronicleStore, workspace: Path, script: Path, n: int) -> list[RoutineRun]:
    spec = AgentSpec(name="main", provider=f"scripted:{script}", model="scripted", workspace=str(workspace))
    engine = RoutineEngine.for_workspace(store, workspace, spec, "w")
    runs = [engine.fire(engine.routines[0], f"manual/{i}") for i in range(n)]
    assert all(r is not None and r.status == "fired" for r in runs)
    return runs  # type: ignore[return-value]


def _run_turn(store: ChronicleStore, workspace: Path, script: Path, run: RoutineRun) -> None:
    loop = AgentLoop(store, ScriptedProvider(script), toolbox_for(()), workspace, options=LoopOptions())
    asyncio.run(loop.run_next(run.session_id))


def _outbox(store: ChronicleStore, workspace: Path, posted: list[dict[str, Any]]) -> Outbox:
    def send(url: str, payload: dict[str, Any]) -> Outcome:
        posted.append(payload)
        return Outcome(True, 1, 200, None)

    return Outbox(store, load_channels(workspace / "chronicle.toml"), set(), sender=send, workspace=workspace)


def _setup(workspace: Path, tmp_path: Path) -> Path:
    (workspace / "chronicle.toml").write_text(TOML, encoding="utf-8")
    return write_script(tmp_path / "s.json", [], **{"routine-report": [response(text("The build is red."))]})


def test_a_restarted_outbox_loads_no_run_whose_findings_were_posted_before(db_url, workspace, tmp_path):
    script = _setup(workspace, tmp_path)
    store = closed_at_end(ChronicleStore(db_url))
    runs = _fired(store, workspace, script, 5)
    for run in runs:
        _run_turn(store, workspace, script, run)
    posted: list[dict[str, Any]] = []
    first = _outbox(store, workspace, posted)
    assert first.pass_once() == 5
    assert first.pass_once() == 0, "posted once"
    restarted = CountingStore(db_url)
    assert _outbox(restarted, workspace, posted).pass_once() == 0
    assert restarted.loads["RoutineRun"] == 0, "the checkpoint is past every run posted"
    assert len(posted) == 5


def test_a_run_still_waiting_below_runs_posted_since_is_found_after_a_restart(db_url, workspace, tmp_path):
    script = _setup(workspace, tmp_path)
    store = closed_at_end(ChronicleStore(db_url))
    early, waiting, late = _fired(store, workspace, script, 3)
    _run_turn(store, workspace, script, early)
    _run_turn(store, workspace, script, late)
    posted: list[dict[str, Any]] = []
    first = _outbox(store, workspace, posted)
    assert first.pass_once() == 2
    assert first.pass_once() == 0
    restarted = CountingStore(db_url)
    outbox = _outbox(restarted, workspace, posted)
    assert outbox.pass_once() == 0, "its turn has not run yet"
    assert restarted.loads["RoutineRun"] == 2, "the waiting run and the one after it; not the one posted before it"
    _run_turn(store, workspace, script, waiting)
    assert outbox.pass_once() == 1
    assert posted[-1]["session_id"] == str(waiting.session_id) and posted[-1]["routine"] == "report"
    assert outbox.pass_once() == 0
    again = CountingStore(db_url)
    assert _outbox(again, workspace, posted).pass_once() == 0
    assert again.loads["RoutineRun"] == 0 and len(posted) == 3


def test_a_run_whose_session_was_erased_is_passed_by_and_the_findings_after_it_are_posted_in_the_same_pass(
        db_url, workspace, tmp_path, monkeypatch):
    """`chronicle forget` erased the run with its session: the outbox reading the routine index meets a run
    it cannot read, lets it go as it lets an erased session's reply go, and goes on (it used to fail the pass)."""
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", base64.b64encode(os.urandom(32)).decode())
    script = _setup(workspace, tmp_path)
    store = closed_at_end(ChronicleStore(db_url))
    erased, kept = _fired(store, workspace, script, 2)
    _run_turn(store, workspace, script, kept)
    forget(store, erased.session_id)
    posted: list[dict[str, Any]] = []
    outbox = _outbox(closed_at_end(ChronicleStore(db_url)), workspace, posted)
    assert outbox.pass_once() == 1 and [p["session_id"] for p in posted] == [str(kept.session_id)]
    outbox.scanned_at = None  # the next pass looks again though nothing was written since
    assert outbox.pass_once() == 0 and outbox.notices is not None and outbox.notices.waiting == {}
