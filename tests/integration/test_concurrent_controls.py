"""Many processes at once submit inputs to, steer and cancel the same sessions while a worker runs them
and readers catch the read models up: every call that returned is in the log afterwards, every input
ran as a turn, the hash chain verifies, and the read models equal a rebuild. Creation under concurrency
is tests/integration/test_store_integrity.py's; this is what comes after it."""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import subprocess
import sys
from typing import Any

from chronicle.domain.agent_spec import AgentSpec
from chronicle.projections import ProjectionEngine, all_projections
from chronicle.runtime.app import controls
from chronicle.runtime.pricing import price
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore, open_store_at
from chronicle.runtime.tools import DEFAULT_TOOLS
from tests import processes
from tests.helpers import cli, response, text, tool_use
from tests.recovery import assert_log_is_whole, assert_no_tool_ran_twice, wait_for

PROCESSES, CALLS = 4, 6


def _act(url: str, sids: list[str], seed: int, out: "multiprocessing.Queue[list[tuple[Any, ...]]]") -> None:
    store, rnd = open_store_at(url), random.Random(seed)
    acknowledged: list[tuple[Any, ...]] = []
    for i in range(CALLS):
        sid = store.resolve_session_id(rnd.choice(sids))
        kind = rnd.choice(["input", "input", "steer", "cancel"])
        if kind == "input":
            acknowledged.append(("input", str(sid), submit_input(store, sid, f"p{seed}-{i}")))
        elif kind == "steer":
            acknowledged.append(("steer", str(sid), controls.steer(store, sid, f"s{seed}-{i}").steer_id))
        else:
            acknowledged.append(("cancel", str(sid), controls.cancel(store, sid, wait_s=0).status))
    out.put(acknowledged)


def _read(url: str, stop: "multiprocessing.synchronize.Event") -> None:
    engine = ProjectionEngine(open_store_at(url), all_projections(pricer=price), batch_size=3)
    while not stop.is_set():
        engine.catch_up()


def test_every_acknowledged_input_steer_and_cancel_from_many_processes_is_recorded_and_runs(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [response(tool_use("b1", "bash", command="sleep 0.2; echo ran >> runs.txt")),
                                                      response(text("done"))]}}))
    store = ChronicleStore(db_url)
    spec = AgentSpec(provider=f"scripted:{script}", model="scripted", tools=DEFAULT_TOOLS, workspace=str(workspace))
    sids = [str(start_session(store, spec, "first")[0].id) for _ in range(2)]
    env = {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}, "CHRONICLE_DB": db_url}
    worker = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "worker", "--concurrency", "2", "--poll", "0.05",
                               "--idle-exit", "2", "--yes"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    ctx = multiprocessing.get_context("fork")
    out: multiprocessing.Queue[list[tuple[Any, ...]]] = ctx.Queue()
    stop = ctx.Event()
    readers = [ctx.Process(target=_read, args=(db_url, stop))]
    actors = [ctx.Process(target=_act, args=(db_url, sids, seed, out)) for seed in range(PROCESSES)]
    try:
        for p in readers:
            p.start()
        wait_for(lambda: any(store.session(store.resolve_session_id(sid)).active_turn_id for sid in sids), timeout=60, interval=0.01)
        for p in actors:  # while a turn runs, so that steering and cancels meet running turns
            p.start()
        acknowledged = [call for _ in actors for call in out.get(timeout=120)]
        for p in actors:
            p.join(timeout=60)
            assert p.exitcode == 0
        worker.wait(timeout=180)
    finally:
        stop.set()
        for p in readers:
            p.join(timeout=60)
        processes.stop(worker)
    assert worker.returncode == 0, worker.stderr.read() if worker.stderr else ""

    inputs: dict[str, set[str]] = {sid: set() for sid in sids}
    steers: dict[str, set[str]] = {sid: set() for sid in sids}
    for sid in sids:
        session = store.session(store.resolve_session_id(sid))
        assert session.status == "idle" and not session.queue, f"{sid} left {session.status} with {len(session.queue)} queued"
        entries = assert_log_is_whole(store, session.id)
        assert_no_tool_ran_twice(entries)
        for e in entries:
            if e["aggregate"] == "session" and e["event"] == "InputQueued":
                inputs[sid].add(e["data"]["input_id"])
            if e["aggregate"] == "session" and e["event"] in ("InputQueued", "SteeringQueued"):
                steers[sid].add(e["data"].get("steer_id") or e["data"]["input_id"])  # with no turn running, steering is queued
        assert {store.turn(t).status for t in session.turns} <= {"completed", "cancelled"}
    for kind, sid, value in acknowledged:
        if kind == "input":
            assert value in inputs[sid], f"acknowledged input {value} of {sid} is not in the log"
        elif kind == "steer":
            assert value in steers[sid], f"acknowledged steering {value} of {sid} is not in the log"
        else:
            assert value in {"idle", "requested", "cancelled"}
    assert any(e for sid in sids for e in cli("log", sid, "--json", db=db_url).stdout.splitlines() if '"SteeringDelivered"' in e
               or '"SteeringRequeued"' in e) or not any(k == "steer" for k, _, _ in acknowledged), "no steering met a running turn"

    assert cli("verify", "--all", db=db_url).returncode == 0
    engine = ProjectionEngine(store, all_projections(pricer=price))
    engine.catch_up()
    incremental = {name: engine.dump(name) for name in engine.projections}
    engine.rebuild()
    assert {name: engine.dump(name) for name in engine.projections} == incremental
    store.close()
