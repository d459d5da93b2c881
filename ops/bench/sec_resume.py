"""Section 4: resume — load a session of 1k / 10k / 100k events in a fresh process state and continue it.

The session is written directly through the domain (no loop, batched saves) as turns of 50
tool steps each, so that building 100k events takes seconds; the store's snapshot intervals
apply as in production. Then a new ChronicleStore (empty cache, as after a restart) loads the
session and runs one more turn of one tool step with the instant provider.
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any, Callable
from uuid import uuid4

import chronicle_side as cs
from common import Context, Section, median
from workload import FINAL, PROMPT, THOUGHT, TOOL_TEXT, tool_input

STEPS_PER_TURN = 50


def build_session(store: Any, events: int, workspace: Any) -> tuple[Any, int]:
    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.domain.content import ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock
    from chronicle.domain.ids import turn_id as make_turn_id
    from chronicle.domain.session import Session
    from chronicle.domain.turn import Turn

    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    spec = AgentSpec(name="main", provider="bench", model="bench-instant", tools=("lookup",), workspace=str(workspace))
    session = Session.start(uuid4(), spec, now)
    store.create_session(session)
    written, batch, number = 1, [], 0
    while written < events:
        number += 1
        now += timedelta(seconds=1)
        input_id = uuid4().hex
        session.queue_input(input_id, PROMPT, now)
        tid = make_turn_id(session.id, input_id)
        session.start_turn(tid, now)
        turn = Turn(id=tid, session_id=session.id, input_id=input_id, number=number, input_text=PROMPT, agent="main", timestamp=now)
        turn.start(now)
        for k in range(STEPS_PER_TURN):
            use = ToolUseBlock(id=f"toolu_{number}_{k}", name="lookup", input=tool_input(k))
            turn.record_response(ModelResponse(content=[TextBlock(text=THOUGHT), use], stop_reason="tool_use"), now)
            turn.record_tool_results([ToolResultBlock(tool_use_id=use.id, content=TOOL_TEXT)], now)
        turn.record_response(ModelResponse(content=[TextBlock(text=FINAL)], stop_reason="end_turn"), now)
        turn.complete(now)
        session.end_turn(tid, now)
        written += 3 + len(turn.pending_events)
        batch.append(turn)
        if len(batch) >= 20:
            store.save(session, *batch)
            batch = []
    store.save(session, *batch)
    return session.id, written


def compact(store: Any, sid: Any) -> None:
    now = datetime(2027, 1, 1, tzinfo=timezone.utc)
    store.update_session(sid, lambda s: s.compact(list(s.head[:-2]), "The records were read, one by one.", "summary", now))
    store.close()


def run(ctx: Context, log: Callable[[str], None]) -> list[Section]:
    s = Section("resume", "4. Resume: load and continue a session (fresh store, empty cache)")
    rows = []
    for backend in ctx.plan.backends:
        if backend == "postgres" and ctx.pg is None:
            s.note(f"PostgreSQL: not available: {ctx.pg_missing}")
            continue
        for size in ctx.plan.resume_sizes:
            d = ctx.scratch / f"resume-{backend}-{size}"
            d.mkdir()
            (d / "ws").mkdir()
            schema = ctx.pg.new_schema() if backend == "postgres" else None
            store = cs.store_for(backend, d, ctx.pg, schema)
            t0 = time.perf_counter()
            sid, written = build_session(store, size, d / "ws")
            built = time.perf_counter() - t0
            turns = len(store.session(sid).turns)
            store.close()
            loads, continues, compacted = [], [], []
            reps = 1 if size >= 100_000 else 3
            for i in range(reps * 2):
                if i == reps:  # as the context monitor would have long before: all but the last 2 turns summarised
                    compact(cs.store_for(backend, d, ctx.pg, schema), sid)
                into = continues if i < reps else compacted
                fresh = cs.store_for(backend, d, ctx.pg, schema)
                t1 = time.perf_counter()
                fresh.session(sid)
                loads.append((time.perf_counter() - t1) * 1000)
                fresh.close()
                fresh = cs.store_for(backend, d, ctx.pg, schema)
                cs.prepare(fresh, 1, d / "ws", session_id=sid)
                fresh.close()
                fresh = cs.store_for(backend, d, ctx.pg, schema)  # cold again: the input is queued, nothing cached
                loop = cs.loop_for(fresh, 1, d / "ws")
                into.append(cs.drive(loop, sid) * 1000)
                fresh.close()
            rows.append([backend, written, turns, median(loads), median(continues), median(compacted)])
            log(f"  {backend} {written} events ({turns} turns, built in {built:.1f} s): load {median(loads):.1f} ms, "
                f"load + one-step turn {median(continues):.1f} ms, compacted {median(compacted):.1f} ms")
    s.note(f"Turns of {STEPS_PER_TURN} tool steps (~{2 * STEPS_PER_TURN + 7} events each); snapshots every 100 events "
           "of a Session, and of a Turn at 100, 200, 300, 400, 600, … events and at its end (runtime/snapshot_schedule.py). 'Continue' = run_next of one more turn with one tool step, from a cold store: it loads "
           "the session, rebuilds the model's context from every turn on the branch, and commits the new steps.")
    s.note("'Compacted' = the same after `Session.Compacted` replaced all but the last 2 turns by a summary, as the "
           "context monitor does at 80 % of the window long before this size: uncompacted, 100k events of these turns "
           "are ~32 MB of messages, far beyond any model's context, so the uncompacted column shows the cost of "
           "reading every turn on the branch (bounded in practice by the context window), the compacted one what "
           "a resume costs.")
    s.table(["backend", "events", "turns", "load session (ms)", "load + continue one turn (ms)",
             "load + continue, compacted (ms)"], rows)
    s.data = {"rows": rows}
    return [s]
