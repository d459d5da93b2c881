"""Measure loading a Session at 100 … 100,000 events, with snapshots and by full replay.

    .venv/bin/python ops/bench_snapshots.py [--db sqlite:///ABS/PATH.db | postgresql://...] [--sizes 100,1000,10000,100000]

Two shapes of history, because a snapshot removes replay cost, not state size:
- "undo/redo": one turn, then undo/redo pairs — many events, constant state;
- "turns": real turns (InputQueued, TurnStarted, TurnEnded) — the state grows (ids of every turn).
Loads use a store without the aggregate cache, so every load reads the database. Not a test:
timings depend on the machine; the README and the issue report quote its output.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from uuid import uuid4

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.session import Session
from chronicle.runtime.store import ChronicleStore

BATCH = 500


def grow(store: ChronicleStore, events: int, shape: str) -> object:
    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    sid = uuid4()
    session = Session.start(sid, AgentSpec(), t)
    store.create_session(session)
    n = 1
    pending = 0
    while n < events:
        t += timedelta(milliseconds=1)
        if shape == "turns" or not session.head:
            session.queue_input(f"in{n}", "ping", t)
            turn = uuid4()
            session.start_turn(turn, t)
            session.end_turn(turn, t)
            n += 3
            pending += 3
        else:
            session.undo(1, t)
            session.redo(t)
            n += 2
            pending += 2
        if pending >= BATCH:
            store.save(session)
            pending = 0
    store.save(session)
    return sid


def timed(fn, repeat: int = 15) -> float:  # type: ignore[no-untyped-def]
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db")
    parser.add_argument("--sizes", default="100,1000,10000,100000")
    args = parser.parse_args()
    url = args.db or f"sqlite:///{Path(tempfile.mkdtemp()) / 'bench.db'}"
    writer = ChronicleStore(url)
    reader = ChronicleStore(url, env={"AGGREGATE_CACHE_MAXSIZE": ""})
    print(f"store {writer.describe()}; snapshot every {writer.snapshotting_intervals[Session]} events")
    print(f"{'shape':<10} {'events':>8} {'version':>8} {'load ms (snapshot)':>19} {'load ms (replay all)':>21}")
    for shape in ("undo/redo", "turns"):
        for size in (int(s) for s in args.sizes.split(",")):
            sid = grow(writer, size, shape)
            loaded = reader.session(sid)  # type: ignore[arg-type]
            with_snapshot = timed(lambda: reader.session(sid))  # type: ignore[arg-type]
            replay = timed(lambda: _replay(reader, sid), repeat=3 if size > 10_000 else 7)
            print(f"{shape:<10} {size:>8} {loaded.version:>8} {with_snapshot:>19.2f} {replay:>21.2f}")


def _replay(store: ChronicleStore, sid: object) -> None:
    aggregate = None
    for event in store.events.get(sid):  # type: ignore[arg-type]
        aggregate = event.mutate(aggregate)


if __name__ == "__main__":
    main()
