"""Section 5: projection rebuild — events per second replaying the whole log into every projection.

The log is written directly through the domain (turns of 50 tool steps, as in section 4), then
`runtime.parallel_rebuild.rebuild` drops the four projections (history, summaries, cost, audit)
and replays the log into all of them, as `chronicle projections rebuild` does: on SQLite each
batch of the log is read and decoded once and applied to the four in one transaction; on
PostgreSQL two processes each do that for half of them. Events/s = events in the log ÷ wall
seconds for all four; then each projection is rebuilt alone (its own read of the log, one process).

The rebuilds run in a fresh process, as `chronicle projections rebuild` does. In the bench's own
process, after the sections before it, the same rebuild measured about a third slower (29k → 20k
events/s on SQLite, same store and code): that process holds what the earlier sections left, which
every cyclic garbage collection walks, and a user's rebuild never carries that.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

import chronicle_side as cs
from common import Context, Section
from sec_resume import build_session


def measure(url: str) -> dict[str, Any]:
    """In this (fresh) process: seconds to rebuild all four projections together, then each alone."""
    from chronicle.runtime.parallel_rebuild import rebuild
    from chronicle.runtime.read_models import projection_engine
    from chronicle.runtime.store import ChronicleStore

    store = ChronicleStore(url)
    engine = projection_engine(store)  # sets the read models up (built once from the log: untimed)
    head = store.max_position()
    t0 = time.perf_counter()
    rebuild(store)  # all four, as `chronicle projections rebuild` does (two processes on PostgreSQL)
    total = time.perf_counter() - t0
    per = {}
    for projection in engine.select():
        t1 = time.perf_counter()
        engine.rebuild([projection.name])
        per[projection.name] = time.perf_counter() - t1
    store.close()
    return {"head": head, "total": total, "per": per}


def run(ctx: Context, log: Callable[[str], None]) -> list[Section]:
    s = Section("rebuild", "5. Projection rebuild: events per second over >= 100k events")
    size = ctx.plan.rebuild_events
    rows = []
    for backend in ctx.plan.backends:
        if backend == "postgres" and ctx.pg is None:
            s.note(f"PostgreSQL: not available: {ctx.pg_missing}")
            continue
        d = ctx.scratch / f"rebuild-{backend}"
        d.mkdir()
        (d / "ws").mkdir()
        schema = ctx.pg.new_schema() if backend == "postgres" else None
        store = cs.store_for(backend, d, ctx.pg, schema)
        written = 0
        while written < size:  # several sessions, as a real store holds
            _, n = build_session(store, min(10_000, size - written), d / "ws")
            written += n
        url = store.url
        store.close()
        done = subprocess.run([sys.executable, str(Path(__file__).resolve()), url], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"rebuild measurement failed: {done.stderr.strip()[-500:]}")
        measured = json.loads(done.stdout.strip().splitlines()[-1])
        head, total, per = measured["head"], measured["total"], measured["per"]
        rows.append([backend, head, total, head / total, *(head / per[n] for n in per)])
        log(f"  {backend}: {head} events rebuilt in {total:.1f} s = {head / total:,.0f} events/s "
            f"({', '.join(f'{n} {head / t:,.0f}/s' for n, t in per.items())})")
        names = list(per)
    if rows:
        s.note("In a fresh process, as `chronicle projections rebuild` runs. "
               "All four projections rebuilt together from position 0 (each batch of the log read and decoded once, "
               "applied to the four in one transaction); events/s = log events ÷ seconds. Per projection: that "
               "projection rebuilt alone, log events ÷ its own seconds.")
        s.table(["backend", "events", "seconds (all)", "events/s (all four)", *(f"{n} events/s" for n in names)], rows)
    s.data = {"rows": rows}
    return [s]


if __name__ == "__main__":
    print(json.dumps(measure(sys.argv[1])))
