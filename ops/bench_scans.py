"""Measure what reads every session of a store: `resume --all`'s census, a worker's work-index scan, self-repair's
passes, the session index and a session prefix, at 1,000 … 10,000 sessions.

    .venv/bin/python ops/bench_scans.py [--db sqlite:///ABS/PATH.db | postgresql://.../db] [--sizes 1000,3000]

Each session is a real turn of one tool step (the bench's workload, through the loop with the instant provider),
so the store holds what a busy deployment's does: sessions, turns, tool calls, the index. Every figure is a fresh
store object (nothing cached), median of 5. Not a test: timings depend on the machine; ops/bench/NOTES.md quotes
its output.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).parent / "bench"))

import chronicle_side as cs  # noqa: E402 - the bench's workload, from ops/bench

from chronicle.runtime.app.resume import census  # noqa: E402
from chronicle.runtime.self_repair import SelfRepair  # noqa: E402
from chronicle.runtime.store import ChronicleStore  # noqa: E402
from chronicle.runtime.work_index import WorkIndex  # noqa: E402


def timed(url: str, measure: Callable[[ChronicleStore], Any], repeats: int = 5) -> float:
    """Median ms of `measure` on a store opened just before (its connection made, nothing read)."""
    times = []
    for _ in range(repeats):
        store = ChronicleStore(url)
        try:
            start = time.perf_counter()
            measure(store)
            times.append((time.perf_counter() - start) * 1e3)
        finally:
            store.close()
    return statistics.median(times)


def second_pass(url: str) -> float:
    """Self-repair as a worker runs it: the first pass reads every session, the next only what moved (timed, ms)."""
    store = ChronicleStore(url)
    try:
        monitor = SelfRepair(store)
        monitor.check_turns()
        start = time.perf_counter()
        monitor.check_turns()
        return (time.perf_counter() - start) * 1e3
    finally:
        store.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="a store URL to fill (default: a new SQLite file); a PostgreSQL database gets a new schema")
    parser.add_argument("--sizes", default="1000,3000", help="comma-separated session counts, each added to the last")
    args = parser.parse_args()
    base = args.db or f"sqlite:///{Path(tempfile.mkdtemp()) / 'scans.db'}"
    schema = f"scans_{uuid.uuid4().hex[:8]}" if base.startswith("postgresql") and "schema=" not in base else None
    url = f"{base}?schema={schema}" if schema else base
    workspace = Path(tempfile.mkdtemp())
    store = ChronicleStore(url)
    made = 0
    print(f"store: {url.split('?')[0]}")
    print("| sessions | census (resume --all) ms | work index scan ms | self-repair 1st / 2nd pass ms | session_ids ms | prefix ms |")
    print("| --- | --- | --- | --- | --- | --- |")
    for size in (int(s) for s in args.sizes.split(",")):
        while made < size:
            cs.run_turn(store, 1, workspace)
            made += 1
        prefix = str(store.session_ids()[made // 2])[:8]
        rows = {
            "census": timed(url, census),
            "index": timed(url, lambda s: WorkIndex(s).sessions()),
            "repair": timed(url, lambda s: SelfRepair(s).check_turns()),
            "ids": timed(url, lambda s: s.session_ids()),
            "prefix": timed(url, lambda s: s.resolve_session_id(prefix)),
        }
        print(f"| {made:,} | {rows['census']:.0f} | {rows['index']:.0f} | {rows['repair']:.0f} / {second_pass(url):.1f} "
              f"| {rows['ids']:.1f} | {rows['prefix']:.2f} |", flush=True)
    store.close()
    if schema:  # made here: dropped here
        import psycopg

        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


if __name__ == "__main__":
    main()
