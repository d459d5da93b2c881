"""Measure what inheriting shared notes costs a cold fork (runtime/timetravel.py `fork`, runtime/notes.py).

    .venv/bin/python ops/bench_fork_notes.py [--db sqlite | postgres] [--turns 25] [--notes 12] [--runs 15]

Two sessions of `--turns` turns (one tool step and the answer each, the bench's workload and its instant provider):
one whose agent has no notes tool (the bench's own session: its fork must read no board), and one whose agent has
the notes tools, with `--notes` notes written on its board between its first turns. Each is forked at its middle
turn on a store just opened (as `chronicle fork` opens one; a new store per run), and the fork alone is timed, then
the fork and one more turn on it (the bench's "fork + step" row). It prints the median of each in ms. Run it with the
code before and after a change to compare. Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent / "bench"))

import chronicle_side as cs  # noqa: E402 - the bench's modules, from ops/bench
from workload import PROMPT  # noqa: E402

from chronicle.domain.agent_spec import AgentSpec  # noqa: E402
from chronicle.runtime.sessions import start_session, submit_input  # noqa: E402
from chronicle.runtime.store import ChronicleStore  # noqa: E402
from chronicle.runtime.timetravel import fork  # noqa: E402

NOTES_TOOLS = ("list_notes", "read_note", "write_note")


def url_for(backend: str, where: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{where / 'chronicle.db'}"
    return f"postgresql://postgres@127.0.0.1:5432/postgres?schema=bench_{uuid.uuid4().hex[:8]}"


def session(store: ChronicleStore, workspace: Path, turns: int, notes: int, with_notes: bool) -> uuid.UUID:
    tools = ("lookup", *NOTES_TOOLS) if with_notes else ("lookup",)
    spec = AgentSpec(name="main", provider="bench", model="bench-instant", tools=tools, workspace=str(workspace))
    started, _ = start_session(store, spec, PROMPT)
    sid = started.id
    for number in range(turns):
        if number:
            submit_input(store, sid, PROMPT)
        cs.drive(cs.loop_for(store, 1, workspace), sid)
        if with_notes and number < notes:
            from chronicle.runtime.notes import change_board

            now = datetime.now(timezone.utc)
            change_board(store, store.session(sid), lambda b, n=number: b.write(f"note-{n}", f"finding {n} " * 20, sid, None, now), now)
    return sid


def timed(url: str, sid: uuid.UUID, at: int, workspace: Path, step: bool) -> float:
    cold = ChronicleStore(url)
    try:
        cold.max_position()  # the connection made before the clock starts, as the bench's cold rows have it
        t0 = time.perf_counter()
        child = fork(cold, sid, at)
        if step:
            submit_input(cold, child.id, PROMPT)
            cs.drive(cs.loop_for(cold, 1, workspace), child.id)
        return (time.perf_counter() - t0) * 1000
    finally:
        cold.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--turns", type=int, default=25)
    parser.add_argument("--notes", type=int, default=12)
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        workspace = where / "ws"
        workspace.mkdir()
        url = url_for(args.db, where)
        store = ChronicleStore(url)
        try:
            plain = session(store, workspace, args.turns, args.notes, with_notes=False)
            noting = session(store, workspace, args.turns, args.notes, with_notes=True)
        finally:
            store.close()
        at = args.turns // 2
        for label, sid in (("no notes tools", plain), (f"notes tools, {min(args.notes, at)} notes at the cut", noting)):
            for step in (False, True):
                timed(url, sid, at, workspace, step)  # one untimed: the process's imports and first decodes
                times = [timed(url, sid, at, workspace, step) for _ in range(args.runs)]
                what = "fork + step" if step else "fork"
                print(f"{args.db:8}  {label:34}  {what:11}  median {statistics.median(times):6.2f} ms  "
                      f"(min {min(times):.2f}, max {max(times):.2f}, {args.runs} runs)")


if __name__ == "__main__":
    main()
