"""Section 3: time travel — the conversation as of a turn, the history of states, a fork.

Workload: a session of S LLM steps made of S/2 turns, each one tool step plus the final answer
(Chronicle's `history --at TURN` and `fork --at TURN` address turns), run through the real
loop (Chronicle) and one `invoke` per turn (LangGraph). Timed from a cold store (a new
ChronicleStore per read, as each CLI command opens one) and on one open store; LangGraph on its
open saver and on a saver just opened (a new connection, as a new process has: the like of
Chronicle's cold store). LangGraph reads a checkpoint id that was noted after each turn, which
is the most favourable way to address its past.

- as of turn: Chronicle `wire_at_turn` (what `history --at` prints: the history projection's wire
  rows up to the cut's log position, as dicts; `cut_at_turn` + `wire_at` when that path cannot
  answer; the projection is caught up once after the run, as any read command or `projections run`
  does, and each cold read checks it is current); the typed API, `cut_at_turn` + `context_at`
  (`Message` models), is timed beside it into the data (`*_typed`); LangGraph `get_state(config at
  the end of that turn)`.
- history of states: Chronicle `log` entries (every event of the session, its turns and tool
  calls, with its state); LangGraph `list(get_state_history(config))`.
- fork + one step: Chronicle `fork --at middle` then one more turn (one tool step + answer)
  on the fork; LangGraph `invoke` from the middle turn's checkpoint with a new input.
- in one long turn (S steps in one turn): Chronicle `turn_wire_at` (what the model had read of the
  turn as of its v-th event, from the turn's projection rows up to that event's log position; the
  Turn replayed, `store.turn(id, version=v)` + `build_context`, when that cannot answer), with the
  state read itself timed beside it into the data (`*_state`), and what `history --at 1 --step N`
  prints (`*_step`: the whole context sent for that step); LangGraph `get_state(checkpoint k)`.

LangGraph (both savers) is run up to 200 steps only: the default saver stores the whole message
list at every checkpoint (quadratic), and listing DeltaChannel's history replays writes per state.
bench-quick runs 50 and 100 steps here.
"""

from __future__ import annotations

import time
import uuid
from typing import Any, Callable

import chronicle_side as cs
import langgraph_side as lg
from common import Context, Section, median
from sec_loop import LABEL, Slot

READS = 5
#: LangGraph runs (both savers) stop here: the default saver's checkpoints hold the whole message list
#: (quadratic), and DeltaChannel's get_state_history replays writes per listed state (4.5 s for 500 states).
LG_MAX_STEPS = 200
QUICK_STEPS = (50, 100)


def _ms(fn: Callable[[], Any]) -> tuple[float, Any]:
    t0 = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t0) * 1000, out


def chronicle_runs(ctx: Context, backend: str, steps: int) -> dict[str, Any]:
    from chronicle.runtime.app.queries import log as log_entries
    from chronicle.runtime.past_context import context_at, history_engine, wire_at
    from chronicle.runtime.past_wire import wire_at_turn
    from chronicle.runtime.timetravel import cut_at_turn, fork

    slot = Slot(ctx, backend)
    try:
        turns = max(2, steps // 2)
        store = slot.chronicle_store()
        sid = None
        for _ in range(turns):
            sid, _ = cs.run_turn(store, 1, slot.dir / "ws", session_id=sid)
        history_engine(store).catch_up()
        store.close()
        out: dict[str, Any] = {"turns": turns}
        def shown(cold: Any, number: int) -> int:
            engine = history_engine(cold)
            wire = wire_at_turn(cold, sid, number, engine)
            return len(wire if wire is not None else wire_at(cold, cut_at_turn(cold, sid, number), engine))

        def typed(cold: Any, number: int) -> int:
            return len(context_at(cold, cut_at_turn(cold, sid, number), history_engine(cold)))

        for label, number in (("early", 1), ("middle", turns // 2), ("late", turns)):
            for key, read in ((label, shown), (f"{label}_typed", typed)):
                times = []
                for _ in range(READS):
                    cold = slot.chronicle_store()
                    ms, count = _ms(lambda cold=cold, read=read, number=number: read(cold, number))
                    times.append(ms)
                    cold.close()
                out[key] = median(times)
            out[f"{label}_messages"] = count
        # The same reads on one open store, as a program using the library or the server makes
        # them (and as LangGraph's saver, holding its connection, is read above): after one read
        # to warm it, READS more are timed.
        warm = slot.chronicle_store()
        try:
            for label, number in (("early", 1), ("middle", turns // 2), ("late", turns)):
                shown(warm, number)
                out[f"{label}_warm"] = median([_ms(lambda: shown(warm, number))[0] for _ in range(READS)])
        finally:
            warm.close()
        times = []
        for _ in range(3):
            cold = slot.chronicle_store()
            ms, entries = _ms(lambda: log_entries(cold, sid))
            times.append(ms)
            cold.close()
        out["history"], out["states"] = median(times), len(entries)
        times = []
        for _ in range(3):
            cold = slot.chronicle_store()

            def fork_and_step() -> None:
                child = fork(cold, sid, turns // 2)
                cs.run_turn(cold, 1, slot.dir / "ws", session_id=child.id)

            times.append(_ms(fork_and_step)[0])
            cold.close()
        out["fork"] = median(times)
        warm = slot.chronicle_store()
        try:  # on one open store, after one untimed fork + step (as a server or library program forks)
            def fork_and_step_warm() -> None:
                child = fork(warm, sid, turns // 2)
                cs.run_turn(warm, 1, slot.dir / "ws", session_id=child.id)

            fork_and_step_warm()
            out["fork_warm"] = median([_ms(fork_and_step_warm)[0] for _ in range(3)])
        finally:
            warm.close()
        return out
    finally:
        slot.drop()


def chronicle_in_turn(ctx: Context, backend: str, steps: int) -> dict[str, Any]:
    from chronicle.domain.context import build_context
    from chronicle.runtime.app.queries import history
    from chronicle.runtime.past_context import history_engine
    from chronicle.runtime.past_wire import turn_wire_at

    slot = Slot(ctx, backend)
    try:
        store = slot.chronicle_store()
        sid, _ = cs.run_turn(store, steps, slot.dir / "ws")
        tid = store.session(sid).turns[0]
        last = store.turn(tid).version
        history_engine(store).catch_up()
        store.close()

        def shown(cold: Any, version: int) -> int:
            wire = turn_wire_at(cold, tid, version, history_engine(cold))
            return len(wire if wire is not None else build_context([cold.turn(tid, version=version)]))

        def state(cold: Any, version: int) -> int:
            return len(build_context([cold.turn(tid, version=version)]))

        def step_read(cold: Any, step: int) -> int:
            return len(history(cold, sid, at=1, step=step))

        out = {}
        for label, version in (("early", max(2, last // 10)), ("middle", last // 2), ("late", last)):
            for key, read in ((label, shown), (f"{label}_state", state)):
                times = []
                for _ in range(READS):
                    cold = slot.chronicle_store()
                    times.append(_ms(lambda cold=cold, read=read, version=version: read(cold, version))[0])
                    cold.close()
                out[key] = median(times)
        for label, step in (("early", steps // 10), ("middle", steps // 2), ("late", steps - 1)):
            times = []
            for _ in range(READS):
                cold = slot.chronicle_store()
                times.append(_ms(lambda cold=cold, step=step: step_read(cold, step))[0])
                cold.close()
            out[f"{label}_step"] = median(times)
        warm = slot.chronicle_store()
        try:  # on one open store, as the library and the server read (see chronicle_runs)
            for label, version in (("early", max(2, last // 10)), ("middle", last // 2), ("late", last)):
                shown(warm, version)
                out[f"{label}_warm"] = median([_ms(lambda: shown(warm, version))[0] for _ in range(READS)])
            for label, step in (("early", steps // 10), ("middle", steps // 2), ("late", steps - 1)):
                step_read(warm, step)
                out[f"{label}_step_warm"] = median([_ms(lambda: step_read(warm, step))[0] for _ in range(READS)])
        finally:
            warm.close()
        return out
    finally:
        slot.drop()


def langgraph_runs(ctx: Context, backend: str, steps: int, delta: bool) -> dict[str, Any]:
    slot = Slot(ctx, backend)
    try:
        turns = max(2, steps // 2)
        with slot.lg_saver() as saver:
            graph, config, ends = lg.run_turns(saver, turns, delta)
            out: dict[str, Any] = {"turns": turns}
            for label, number in (("early", 1), ("middle", turns // 2), ("late", turns)):
                at = ends[number - 1]
                times = []
                for _ in range(READS):
                    ms, state = _ms(lambda: graph.get_state(at))
                    times.append(ms)
                out[label] = median(times)
                out[f"{label}_messages"] = len(state.values["messages"])
            times = []
            for _ in range(3):
                ms, states = _ms(lambda: list(graph.get_state_history(config)))
                times.append(ms)
            out["history"], out["states"] = median(times), len(states)
            mid = ends[turns // 2 - 1]
            times = []
            for _ in range(3):
                fork_config = {**mid, "recursion_limit": 20}
                times.append(_ms(lambda: graph.invoke({"messages": [("user", lg.PROMPT)]}, fork_config))[0])
            out["fork"] = median(times)
        # The same reads and fork on a saver just opened (a new connection, the graph built before the
        # clock starts), as Chronicle's cold columns are timed on a store just opened.
        for label, number in (("early", 1), ("middle", turns // 2), ("late", turns)):
            times = []
            for _ in range(READS):
                with slot.lg_saver(cold=True) as cold:
                    reader = lg.build_graph(1, delta, cold)
                    times.append(_ms(lambda: reader.get_state(ends[number - 1]))[0])
            out[f"{label}_cold"] = median(times)
        times = []
        for _ in range(3):
            with slot.lg_saver(cold=True) as cold:
                forker = lg.build_graph(1, delta, cold)
                fork_config = {**ends[turns // 2 - 1], "recursion_limit": 20}
                times.append(_ms(lambda: forker.invoke({"messages": [("user", lg.PROMPT)]}, fork_config))[0])
        out["fork_cold"] = median(times)
        return out
    finally:
        slot.drop()


def langgraph_in_turn(ctx: Context, backend: str, steps: int, delta: bool) -> dict[str, Any]:
    slot = Slot(ctx, backend)
    try:
        with slot.lg_saver() as saver:
            _, graph, config = lg.run_thread(saver, steps, delta, thread_id=uuid.uuid4().hex)
            history = list(reversed(list(graph.get_state_history(config))))  # oldest first
            out = {}
            n = len(history)
            for label, index in (("early", n // 10), ("middle", n // 2), ("late", n - 1)):
                at = history[index].config
                out[label] = median([_ms(lambda: graph.get_state(at))[0] for _ in range(READS)])
        return out
    finally:
        slot.drop()


def run(ctx: Context, log: Callable[[str], None]) -> list[Section]:
    s = Section("timetravel", "3. Time travel: conversation as of a turn, history of states, fork")
    systems = ["chronicle"] + (["lg_default"] if lg.AVAILABLE else []) + (["lg_delta"] if lg.AVAILABLE and lg.DELTA else [])
    rows, inturn_rows, data = [], [], {}
    for backend in ctx.plan.backends:
        if backend == "postgres" and ctx.pg is None:
            s.note(f"PostgreSQL: not available: {ctx.pg_missing}")
            continue
        for steps in QUICK_STEPS if ctx.plan.quick else ctx.plan.steps:
            for system in systems:
                if system != "chronicle" and steps > LG_MAX_STEPS:
                    continue
                t0 = time.perf_counter()
                if system == "chronicle":
                    r, t = chronicle_runs(ctx, backend, steps), chronicle_in_turn(ctx, backend, steps)
                else:
                    r = langgraph_runs(ctx, backend, steps, delta=system == "lg_delta")
                    t = langgraph_in_turn(ctx, backend, steps, delta=system == "lg_delta")
                data[f"{backend}/{system}/{steps}"] = {"turns": r, "in_turn": t}
                # Chronicle's plain keys are its cold reads, `_warm` its open store's; LangGraph's plain keys are its
                # open saver's and `_cold` a saver just opened: each goes in the column group it was timed for.
                cold = [r.get(f"{k}_cold", r[k]) for k in ("early", "middle", "late")]
                warm = [r.get(f"{k}_warm", r[k]) for k in ("early", "middle", "late")]
                rows.append([backend, steps, r["turns"], LABEL[system], *cold, *warm,
                             r["late_messages"], r["history"], r["states"], r.get("fork_cold", r["fork"]), r.get("fork_warm", r["fork"])])
                state = [t.get(f"{k}_{read}", "—") for read in ("step", "state") for k in ("early", "middle", "late")]
                warm_in = [t.get(f"{k}_{read}", "—") for read in ("warm", "step_warm") for k in ("early", "middle", "late")]
                inturn_rows.append([backend, steps, LABEL[system], t["early"], t["middle"], t["late"], *state, *warm_in])
                typed = f" (typed {r['early_typed']:.1f}/{r['middle_typed']:.1f}/{r['late_typed']:.1f})" if "early_typed" in r else ""
                hot = f" (open store {r['early_warm']:.1f}/{r['middle_warm']:.1f}/{r['late_warm']:.1f})" if "early_warm" in r else ""
                hot += (f" (saver just opened {r['early_cold']:.1f}/{r['middle_cold']:.1f}/{r['late_cold']:.1f}, "
                        f"fork+step {r['fork_cold']:.1f})" if "fork_cold" in r else "")
                log(f"  {backend} {system} {steps}: as of turn {r['early']:.1f}/{r['middle']:.1f}/{r['late']:.1f} ms{hot}{typed}, "
                    f"history {r['history']:.0f} ms ({r['states']} states), fork+step {r['fork']:.1f} ms"
                    + (f" (open store {r['fork_warm']:.1f})" if "fork_warm" in r else "") + "; "
                    f"in one turn {t['early']:.1f}/{t['middle']:.1f}/{t['late']:.1f} ms"
                    + (f" (history --step {t['early_step']:.1f}/{t['middle_step']:.1f}/{t['late_step']:.1f}; "
                       f"state {t['early_state']:.1f}/{t['middle_state']:.1f}/{t['late_state']:.1f})" if "early_state" in t else "")
                    + f" ({time.perf_counter() - t0:.1f} s)")
    s.note("A session of S LLM steps = S/2 turns of one tool step + the final answer. Reads from a cold store "
           f"(Chronicle) or by the checkpoint id noted after each turn (LangGraph); medians of {READS} reads, ms. "
           f"LangGraph (both savers) is run up to {LG_MAX_STEPS} steps only: the default saver stores the whole message "
           "list at every checkpoint, and listing DeltaChannel's history took 4.5 s for 500 states already. History = listing every state: Chronicle's `log` entries, LangGraph's `get_state_history`.")
    s.note("Open store: Chronicle's same reads on one store kept open (a program using the library, or the server, "
           "reads this way), after one untimed read; LangGraph's on its open saver. The other read and fork columns: "
           "Chronicle on a store just opened, LangGraph on a saver just opened (a new connection to its existing "
           "tables, the graph built before the clock starts). History of states: LangGraph on its open saver.")
    s.table(["backend", "steps", "turns", "system", "as of turn 1", "as of middle turn", "as of last turn",
             "turn 1 (open store)", "middle (open store)", "last (open store)", "messages at last turn", "history of states", "states listed", "fork at middle + one step",
             "fork + step (open store)"], rows)
    s.note("Inside one long turn of S steps (early = 10 %, middle, late = last version), ms. Chronicle, three reads: "
           "the turn's messages as of its v-th event for display (`past_wire.turn_wire_at`: the history projection's "
           "rows up to that event's log position); what `history --at 1 --step N --json` prints (the whole context the "
           "model was sent for step N: for a branch that only grew, the previous turns as of their end plus the "
           "turn's rows up to the step's cut, `past_wire.wire_at_step`); and the Turn aggregate itself (`store.turn(id, version=v)` + `build_context`: a replay of the "
           "turn's events after its newest snapshot at or below v). LangGraph: `get_state` of the checkpoint at the "
           "same share of its history (one read, in the display columns).")
    s.table(["backend", "steps", "system", "early (display)", "middle (display)", "late (display)",
             "early (--step)", "middle (--step)", "late (--step)", "early (Turn)", "middle (Turn)", "late (Turn)",
             "early (display, open store)", "middle (display, open store)", "late (display, open store)",
             "early (--step, open store)", "middle (--step, open store)", "late (--step, open store)"], inturn_rows)
    s.data = data
    return [s]
