"""Measure what the forget check costs a step of the loop, with encryption at rest on.

    .venv/bin/python ops/bench_forget_check.py [--db sqlite | postgres] [--steps 200] [--runs 7]

Each run is one turn of `--steps` LLM steps (a scripted model asking for a trivial tool each step,
then answering) on a fresh encrypted store, driven through the library as a program would. It prints
the median wall time per step (the check, runtime/shred_marks.py, is one key-table lookup per save
holding tree-keyed events, never one per event). Run it with the code before and after the check to
compare. Not a test: timings depend on the machine.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path

os.environ.setdefault("CHRONICLE_CIPHER_KEY", base64.b64encode(os.urandom(32)).decode())

from chronicle import Agent, Chronicle, tool  # noqa: E402 - after the key is set


@tool(read_only=True)
def ping(n: int) -> str:
    """Answer pong.

    Args:
        n: The step's number (each call differs, as a real agent's do).
    """
    return f"pong {n}"


def script(path: Path, steps: int) -> str:
    calls = [{"content": [{"type": "tool_use", "id": f"t{i}", "name": "ping", "input": {"n": i}}], "stop_reason": "tool_use",
              "usage": {"input_tokens": 10, "output_tokens": 5}} for i in range(steps)]
    done = {"content": [{"type": "text", "text": "done"}], "stop_reason": "end_turn", "usage": {"input_tokens": 10, "output_tokens": 5}}
    path.write_text(json.dumps({"agents": {"main": [*calls, done]}}), encoding="utf-8")
    return f"scripted:{path}"


def url_for(backend: str, where: Path) -> str:
    if backend == "sqlite":
        return f"sqlite:///{where / 'chronicle.db'}"
    return f"postgresql://postgres@127.0.0.1:5432/postgres?schema=bench_{uuid.uuid4().hex[:8]}"


def one_run(backend: str, steps: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        app = Chronicle(url_for(backend, where))
        agent = Agent(tools=[ping], provider=script(where / "s.json", steps))
        app.run_sync(agent, "warm up", workspace=where, max_iterations=steps + 5)  # opening, tables, imports: not a step's cost
        agent = Agent(tools=[ping], provider=script(where / "s2.json", steps))
        started = time.perf_counter()
        result = app.run_sync(agent, "go", workspace=where, max_iterations=steps + 5)
        elapsed = time.perf_counter() - started
        assert result.status == "completed", result.reason
        app.close()
        return elapsed / (steps + 1)


def check_alone(times: int = 20000) -> float | None:
    """The key-table lookup a save makes, alone, in µs (None where the code has no such check)."""
    try:
        from chronicle.runtime.shred_marks import refuse_forgotten_sqlite
    except ImportError:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp)
        app = Chronicle(url_for("sqlite", where))
        done = app.run_sync(Agent(tools=[ping], provider=script(where / "s.json", 1)), "one", workspace=where)
        tree = uuid.UUID(done.session_id)
        with app.store.recorder.datastore.transaction(commit=False) as cursor:  # type: ignore[attr-defined]
            started = time.perf_counter()
            for _ in range(times):
                refuse_forgotten_sqlite(cursor, [tree])
            took = (time.perf_counter() - started) / times
        app.close()
        return took * 1e6


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    per_step = [one_run(args.db, args.steps) for _ in range(args.runs)]
    print(f"{args.db}: {statistics.median(per_step) * 1000:.3f} ms per step (median of {args.runs} runs of {args.steps} steps; "
          f"min {min(per_step) * 1000:.3f})")
    if args.db == "sqlite" and (alone := check_alone()) is not None:
        print(f"the check alone (one per save with tree-keyed events): {alone:.1f} µs")


if __name__ == "__main__":
    main()
