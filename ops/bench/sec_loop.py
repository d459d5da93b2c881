"""Sections 1 and 2: loop overhead per LLM step, commits per step, and bytes stored per session.

Every run gets a fresh database (SQLite file / PostgreSQL schema). Commits are counted in a
separate, untimed run: on SQLite by tracing COMMIT statements on every connection, on
PostgreSQL by the database's xact_commit counter (which includes every transaction a library
opens, reads included).
"""

from __future__ import annotations

import shutil
import time
import uuid
from typing import Any, Callable

import chronicle_side as cs
import langgraph_side as lg
from common import Context, PgTransactionCounter, Section, SqliteCommitCounter, human_bytes, median, ratio, sqlite_bytes
from floor import pg_floor, sqlite_floor

SYSTEMS = ("chronicle", "lg_default", "lg_delta")
LABEL = {"chronicle": "Chronicle", "lg_default": "LangGraph (default saver)", "lg_delta": "LangGraph (DeltaChannel)"}


class Slot:
    """A fresh place to store one run: a directory for SQLite, a schema for PostgreSQL."""

    def __init__(self, ctx: Context, backend: str) -> None:
        self.backend = backend
        self.ctx = ctx
        self.dir = ctx.scratch / uuid.uuid4().hex[:8]
        self.dir.mkdir()
        (self.dir / "ws").mkdir()
        self.schema = ctx.pg.new_schema() if backend == "postgres" else None

    def chronicle_store(self) -> Any:
        return cs.store_for(self.backend, self.dir, self.ctx.pg, self.schema)

    def lg_saver(self, cold: bool = False) -> Any:
        """`cold`: a new connection to the saver's existing tables (lg.cold_saver), for reads timed
        the way Chronicle's are on a store just opened."""
        url = lg.pg_url_for(self.ctx.pg.base, self.schema) if self.schema else None
        return (lg.cold_saver if cold else lg.saver)(self.backend, self.dir, url)

    def bytes(self, system: str) -> tuple[int, int]:
        if self.backend == "sqlite":
            return sqlite_bytes(self.dir / ("chronicle.db" if system == "chronicle" else "langgraph.db"))
        return self.ctx.pg.schema_bytes(self.schema)

    def drop(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)
        if self.schema:
            import psycopg

            with psycopg.connect(self.ctx.pg.base, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA "{self.schema}" CASCADE')


def one_run(ctx: Context, backend: str, system: str, steps: int, measure_bytes: bool) -> dict[str, Any]:
    slot = Slot(ctx, backend)
    try:
        out: dict[str, Any] = {}
        cpu0 = time.process_time()
        if system == "chronicle":
            store = slot.chronicle_store()
            loop, sid = cs.prepare(store, steps, slot.dir / "ws")
            cpu0 = time.process_time()
            out["seconds"] = cs.drive(loop, sid)
            out["cpu"] = time.process_time() - cpu0
            if measure_bytes:
                out["raw"] = cs.message_bytes(store, sid)
            store.close()
        else:
            with slot.lg_saver() as saver:
                cpu0 = time.process_time()
                out["seconds"], _, _ = lg.run_thread(saver, steps, delta=system == "lg_delta")
                out["cpu"] = time.process_time() - cpu0
        if measure_bytes:
            out["disk"], out["payload"] = slot.bytes(system)
        return out
    finally:
        slot.drop()


def count_commits(ctx: Context, backend: str, system: str, steps: int) -> tuple[float, float, float | None]:
    """(commits, client transactions, client statements) per LLM step, from an untimed run (the
    session's creation is not counted). On SQLite the first two are the COMMITs traced and
    statements are not counted; on PostgreSQL the first is the database's xact_commit, the others
    what the client opened and sent (PgTransactionCounter)."""
    slot = Slot(ctx, backend)
    try:
        if backend == "sqlite":
            with SqliteCommitCounter() as counter:
                if system == "chronicle":
                    store = slot.chronicle_store()
                    loop, sid = cs.prepare(store, steps, slot.dir / "ws")
                    counter.commits = 0
                    cs.drive(loop, sid)
                    store.close()
                else:
                    with slot.lg_saver() as saver:
                        counter.commits = 0
                        lg.run_thread(saver, steps, delta=system == "lg_delta")
                commits = counter.commits
        else:
            pg = ctx.pg
            with PgTransactionCounter() as client:
                if system == "chronicle":
                    store = slot.chronicle_store()
                    loop, sid = cs.prepare(store, steps, slot.dir / "ws")
                    client.transactions, client.statements, before = 0, 0, pg.xact_commits()
                    cs.drive(loop, sid)
                    store.close()
                else:
                    with slot.lg_saver() as saver:
                        client.transactions, client.statements, before = 0, 0, pg.xact_commits()
                        lg.run_thread(saver, steps, delta=system == "lg_delta")
                seen, sent = client.transactions, client.statements
            commits = pg.xact_commits() - before - 1  # the counter's own read between the two
            return commits / (steps + 1), seen / (steps + 1), sent / (steps + 1)
        return commits / (steps + 1), commits / (steps + 1), None
    finally:
        slot.drop()


def run(ctx: Context, log: Callable[[str], None]) -> list[Section]:
    plan = ctx.plan
    loop_s = Section("loop", "1. Loop overhead: ms per LLM step (N tool steps + the final answer)")
    store_s = Section("storage", "2. Storage: bytes stored per session")
    systems = [s for s in SYSTEMS if s == "chronicle" or lg.AVAILABLE]
    if "lg_delta" in systems and not lg.DELTA:
        systems.remove("lg_delta")
        loop_s.note("LangGraph DeltaChannel: not available in the installed langgraph version.")
    if not lg.AVAILABLE:
        loop_s.note(f"LangGraph: not available: {lg.MISSING}")
    results: dict[str, Any] = {}
    for backend in plan.backends:
        if backend == "postgres" and ctx.pg is None:
            loop_s.note(f"PostgreSQL: not available: {ctx.pg_missing}")
            continue
        floor = median([sqlite_floor(ctx.scratch) if backend == "sqlite" else pg_floor(ctx.pg) for _ in range(3)])
        log(f"  floor {backend}: {floor:.3f} ms per INSERT+COMMIT")
        r: dict[str, Any] = {"floor_ms": floor, "runs": {}, "commits": {}}
        for system in systems:
            counted = count_commits(ctx, backend, system, 50)
            r["commits"][system], r.setdefault("transactions", {})[system], r.setdefault("statements", {})[system] = counted
            sent = r["statements"][system]
            log(f"  commits/step {backend} {system}: {r['commits'][system]:.2f} "
                f"(client-side transactions {r['transactions'][system]:.2f}" + ("" if sent is None else f", statements {sent:.1f}") + ")")
        for steps in plan.steps:
            # The systems take turns repeat by repeat, so a shared machine's slow minute slows
            # each of them rather than whichever happened to be running (ratios are the point).
            times: dict[str, list[float]] = {system: [] for system in systems}
            cpus: dict[str, list[float]] = {system: [] for system in systems}
            first: dict[str, dict[str, Any]] = {}
            for i in range(plan.repeats[steps]):
                for system in systems:
                    out = one_run(ctx, backend, system, steps, measure_bytes=i == 0)
                    times[system].append(out["seconds"] * 1000 / (steps + 1))
                    cpus[system].append(out["cpu"] * 1000 / (steps + 1))
                    first.setdefault(system, out)
            for system in systems:
                ms = times[system]
                r["runs"][(system, steps)] = {"ms": median(ms), "all_ms": ms, "cpu_ms": median(cpus[system]),
                                              **{k: v for k, v in first[system].items() if k != "seconds"}}
                log(f"  {backend} {system} {steps}: {median(ms):.3f} ms/step ({', '.join(f'{t:.2f}' for t in ms)})")
        results[backend] = r
    _write_loop(loop_s, results, systems, plan.steps)
    _write_storage(store_s, results, systems, plan.steps)
    loop_s.data = {b: {**v, "runs": {f"{k[0]}@{k[1]}": x for k, x in v["runs"].items()}} for b, v in results.items()}
    return [loop_s, store_s]


def _write_loop(s: Section, results: dict, systems: list[str], steps: tuple[int, ...]) -> None:
    header = ["backend", "steps"] + [LABEL[x] for x in systems] + ["raw commit floor (ms/commit)"]
    header += [f"Chronicle ÷ {LABEL[x]}" for x in systems if x != "chronicle"]
    s.note("Medians of the repeats; the systems take turns run by run (Chronicle, then each LangGraph saver, then "
           "Chronicle again), so a slow spell of the shared machine falls on all of them.")
    rows = []
    for backend, r in results.items():
        for n in steps:
            ms = {x: r["runs"][(x, n)]["ms"] for x in systems}
            rows.append([backend, n] + [ms[x] for x in systems] + [r["floor_ms"]] + [ratio(ms["chronicle"], ms[x]) for x in systems if x != "chronicle"])
    s.table(header, rows)
    rows = []
    for backend, r in results.items():
        for n in steps:
            cpu = {x: r["runs"][(x, n)]["cpu_ms"] for x in systems}
            rows.append([backend, n] + [cpu[x] for x in systems] + [ratio(cpu["chronicle"], cpu[x]) for x in systems if x != "chronicle"])
    s.note("CPU ms per LLM step in the benchmark process (excludes fsync waits and the PostgreSQL server's own work; "
           "less sensitive to the shared machine's I/O load than wall time):")
    s.table(["backend", "steps"] + [LABEL[x] for x in systems] + [f"Chronicle ÷ {LABEL[x]}" for x in systems if x != "chronicle"], rows)
    rows = []
    for backend, r in results.items():
        for x in systems:
            c = r["commits"][x]
            ms = r["runs"][(x, steps[0])]["ms"]
            per_commit = ratio(ms, c)
            sent = r["statements"][x]
            rows.append([backend, LABEL[x], c, r["transactions"][x], "—" if sent is None else sent, per_commit,
                         ratio(per_commit, r["floor_ms"])])
    s.note(f"Commits per LLM step (counted in an untimed run at 50 steps) and the time per commit at {steps[0]} steps. "
           "On PostgreSQL \"commits\" is the database's xact_commit (it also counts what other backends and the "
           "server do meanwhile) and \"client transactions\" what the process opened: each top-level transaction "
           "and each autocommit statement outside one, and \"client statements\" each statement it sent (an "
           "executemany counts its rows); on SQLite both commit columns are the COMMITs traced:")
    s.table(["backend", "system", "commits per LLM step", "client transactions per LLM step", "client statements per LLM step",
             "ms per commit", "÷ raw floor"], rows)
    rows = []
    for backend, r in results.items():
        for x in systems:
            first, last = r["runs"][(x, steps[0])]["ms"], r["runs"][(x, steps[-1])]["ms"]
            rows.append([backend, LABEL[x], f"{steps[-1]} ÷ {steps[0]}", ratio(last, first)])
    s.note("Flatness: ms per step at the longest run ÷ at the shortest (1.0 = flat):")
    s.table(["backend", "system", "steps", "ratio"], rows)


def _write_storage(s: Section, results: dict, systems: list[str], steps: tuple[int, ...]) -> None:
    rows = []
    for backend, r in results.items():
        for n in steps:
            raw = r["runs"][("chronicle", n)].get("raw", 0)
            for x in systems:
                run_ = r["runs"][(x, n)]
                rows.append([backend, n, LABEL[x], human_bytes(run_["disk"]), human_bytes(run_["payload"]), human_bytes(raw),
                             ratio(run_["disk"], raw), ratio(run_["payload"], raw)])
    s.note(
        "On disk = SQLite file after checkpoint + VACUUM, or pg_total_relation_size of every table (indexes, TOAST); "
        "payload = the bytes of every column of every row; raw = the conversation as compact JSON (what the model reads)."
    )
    s.table(["backend", "steps", "system", "on disk", "payload", "raw messages", "disk ÷ raw", "payload ÷ raw"], rows)
    rows = []
    for backend, r in results.items():
        for x in systems:
            a, b = r["runs"][(x, steps[0])]["payload"], r["runs"][(x, steps[-1])]["payload"]
            growth = ratio(b / (steps[-1] + 1), a / (steps[0] + 1))
            shape = "linear" if growth < 1.5 else ("quadratic-ish" if growth > 0.5 * (steps[-1] / steps[0]) else "super-linear")
            rows.append([backend, LABEL[x], f"{steps[-1]} ÷ {steps[0]}", growth, shape])
    s.note("Growth shape: payload bytes per step at the longest run ÷ at the shortest (1.0 = linear; ≈ steps ratio = quadratic):")
    s.table(["backend", "system", "steps", "bytes/step ratio", "shape"], rows)
