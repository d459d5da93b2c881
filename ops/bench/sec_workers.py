"""Section 7 (PostgreSQL): turns per second with 1, 2 and 4 `chronicle worker` processes.

Many sessions each get a few queued inputs (`submit`, recorded before any worker starts);
then K worker processes (`chronicle worker --idle-exit 1`, 4 sessions at a time each) drain
them, with the scripted provider answering each turn with one read-only tool step
(`list_dir`) and a final text. Two workloads: "overhead" (instant model: what the runtime
and the database cost) and "model 0.3 s" (each model call takes 0.3 s, as real ones take
seconds: what more workers buy when turns wait on the model). Throughput is measured from the events themselves: turns
completed ÷ (last TurnEnded − first TurnStarted), so process start-up and the idle wait
before exit are not counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import chronicle_side as cs
from common import Context, Section

SESSIONS_QUICK, SESSIONS_FULL = 24, 40
INPUTS = 3


WORKLOADS = {"overhead": 0.0, "model 0.3 s": 0.3}


def script(path: Path, delay_s: float = 0.0) -> str:
    responses = [
        {"content": [{"type": "text", "text": "Let me look."}, {"type": "tool_use", "id": "toolu_1", "name": "list_dir", "input": {"path": "."}}],
         "stop_reason": "tool_use", "usage": {"input_tokens": 10, "output_tokens": 5}, "delay_s": delay_s},
        {"content": [{"type": "text", "text": "Done."}], "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 5},
         "delay_s": delay_s},
    ]
    path.write_text(json.dumps({"agents": {"main": responses}, "title": ["Bench session"]}), encoding="utf-8")
    return f"scripted:{path}"


def fill(store: object, sessions: int, provider: str, workspace: Path) -> None:
    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.runtime.sessions import start_session, submit_input

    spec = AgentSpec(name="main", provider=provider, model="scripted", tools=("list_dir",), workspace=str(workspace))
    for _ in range(sessions):
        session, _ = start_session(store, spec, "List the workspace.")  # type: ignore[arg-type]
        for _ in range(INPUTS - 1):
            submit_input(store, session.id, "And again.")  # type: ignore[arg-type]


def measure(store: object) -> tuple[int, float]:
    """(turns completed, seconds from the first turn start to the last turn end), from the log."""
    firsts, lasts, done = [], [], 0
    for sid in store.session_ids():  # type: ignore[attr-defined]
        for _, event in store.events_with_positions([sid]):  # type: ignore[attr-defined]
            name = type(event).__name__
            if name == "TurnStarted":
                firsts.append(event.timestamp)
            elif name == "TurnEnded":
                lasts.append(event.timestamp)
                done += getattr(event, "status", "completed") == "completed"
    if not firsts or not lasts:
        return 0, float("nan")
    return done, (max(lasts) - min(firsts)).total_seconds()


def run(ctx: Context, log: Callable[[str], None]) -> list[Section]:
    s = Section("workers", "7. Workers (PostgreSQL): turns per second with 1, 2, 4 worker processes")
    if ctx.pg is None:
        return [s.unavailable(ctx.pg_missing or "PostgreSQL was not selected (--backends)")]
    sessions = SESSIONS_QUICK if ctx.plan.quick else SESSIONS_FULL
    chronicle = str(Path(sys.executable).with_name("chronicle"))
    rows = []
    for workload, delay_s in WORKLOADS.items():
        rows += _workload(ctx, log, chronicle, sessions, workload, delay_s)
    s.note(f"{sessions} sessions × {INPUTS} queued inputs; each turn = one `list_dir` step + the final answer "
           "(scripted provider; workload \"model 0.3 s\": each of the two model calls takes 0.3 s); each worker process "
           "advances up to 4 sessions at a time. Seconds = first turn start to last turn end, from the events' own "
           "timestamps. The machine has 2 cores.")
    s.table(["workload", "worker processes", "sessions", "inputs", "turns completed", "seconds", "turns/s", "× one worker",
             "wall incl. start-up (s)"], rows)
    s.data = {"rows": rows}
    return [s]


def _workload(ctx: Context, log: Callable[[str], None], chronicle: str, sessions: int, workload: str,
              delay_s: float) -> list[list[object]]:
    assert ctx.pg is not None
    rows: list[list[object]] = []
    base = None
    for k in ctx.plan.workers:
        d = ctx.scratch / f"workers-{workload.split()[0]}-{k}"
        (d / "ws").mkdir(parents=True)
        schema = ctx.pg.new_schema()
        url = f"{ctx.pg.base}?schema={schema}"
        store = cs.store_for("postgres", d, ctx.pg, schema)
        fill(store, sessions, script(d / "script.json", delay_s), d / "ws")
        env = {**os.environ, "CHRONICLE_DB": url}
        env.pop("ANTHROPIC_API_KEY", None)
        t0 = time.perf_counter()
        procs = [
            subprocess.Popen([chronicle, "worker", "--idle-exit", "1", "--poll", "0.1", "--concurrency", "4"],
                             env=env, cwd=d, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(k)
        ]
        codes = [p.wait(timeout=600) for p in procs]
        wall = time.perf_counter() - t0
        done, seconds = measure(store)
        store.close()
        rate = done / seconds if seconds == seconds and seconds > 0 else float("nan")
        base = base or rate
        rows.append([workload, k, sessions, sessions * INPUTS, done, seconds, rate, rate / base if base else float("nan"), wall])
        log(f"  {workload}, {k} worker(s): {done}/{sessions * INPUTS} turns in {seconds:.1f} s = {rate:.1f} turns/s "
            f"(exit codes {codes}, wall incl. start-up and idle exit {wall:.1f} s)")
    return rows
