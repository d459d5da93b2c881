"""Section 8: CLI start-up, the wall and CPU time of read-only commands on a small store.

Each command runs as a user runs it (the installed `chronicle` script, a fresh process), N times;
the table gives the median and the minimum (the minimum is the least disturbed by other processes
on a shared machine). CPU = user + system time of the child. The floor is the interpreter alone
(`python -c pass`), and the import breakdown (`python -X importtime`, self time summed by top-level
package) says where the rest goes for `sessions`.
"""

from __future__ import annotations

import collections
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

from common import Context, Section, median, ratio

ROOT = Path(__file__).resolve().parents[2]


def _chronicle() -> list[str]:
    script = Path(sys.executable).with_name("chronicle")
    return [str(script)] if script.exists() else [sys.executable, "-m", "chronicle.runtime.cli"]


def _time(argv: list[str], env: dict[str, str], runs: int) -> tuple[float, float, float, float]:
    """(median wall, min wall, median cpu, min cpu) in ms."""
    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        walls.append((time.perf_counter() - started) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(argv)} exited {done.returncode}: {done.stderr.strip()[:300]}")
    return median(walls), min(walls), median(cpus), min(cpus)


def _imports(argv: list[str], env: dict[str, str]) -> list[tuple[str, float]]:
    """Self import time (ms) summed by top-level package (chronicle by subpackage), largest first."""
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "chronicle.runtime.cli", *argv], env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    totals: collections.Counter[str] = collections.Counter()
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        self_us, _, name = line[len("import time:"):].split("|")
        name = name.strip()
        top = ".".join(name.split(".")[:2]) if name.startswith("chronicle.") else name.split(".")[0]
        totals[top] += int(self_us)
    return [(name, us / 1000) for name, us in totals.most_common()]


def _compile_bytecode(env: dict[str, str]) -> None:
    """Time commands as an installed package runs: from bytecode. pip compiles a wheel's modules when it
    installs them, but this checkout is an editable install, whose modules are compiled on first import
    only, and not at all where PYTHONDONTWRITEBYTECODE is set (as on the CI machines): every command
    would then compile ~150 modules from source, which is not what a user's start-up costs."""
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    packages = [str(ROOT / name) for name in ("chronicle", "domain", "runtime", "projections")]
    subprocess.run([sys.executable, "-m", "compileall", "-q", *packages], env=env, check=True, capture_output=True)


def _small_store(ctx: Context, env: dict[str, str]) -> tuple[str, str]:
    """The demo's store (a two-turn scripted session with tools): its URL and session id."""
    directory = ctx.scratch / "startup-demo"
    subprocess.run([*_chronicle(), "demo", "--dir", str(directory)], env=env, check=True, capture_output=True, timeout=300)
    url = f"sqlite:///{directory / 'chronicle.db'}"
    listed = subprocess.run([*_chronicle(), "sessions", "--json"], env={**env, "CHRONICLE_DB": url}, check=True,
                            capture_output=True, text=True)
    return url, json.loads(listed.stdout.splitlines()[0])["session_id"]


def run(ctx: Context, log: Callable[[str], None]) -> list[Section]:
    s = Section("startup", "8. CLI start-up: read-only commands on a small store (fresh process each)")
    runs = 7 if ctx.plan.quick else 15
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CHRONICLE_", "ANTHROPIC_", "OPENAI_"))}
    env["COLUMNS"] = "120"
    _compile_bytecode(env)
    url, sid = _small_store(ctx, env)
    env_db = {**env, "CHRONICLE_DB": url}
    cases: list[tuple[str, list[str], dict[str, str]]] = [
        ("python -c pass (floor)", [sys.executable, "-c", "pass"], env),
        ("chronicle --version", [*_chronicle(), "--version"], env),
        ("chronicle --help", [*_chronicle(), "--help"], env),
        ("chronicle sessions", [*_chronicle(), "sessions"], env_db),
        ("chronicle sessions --json", [*_chronicle(), "sessions", "--json"], env_db),
        (f"chronicle log {sid[:8]}", [*_chronicle(), "log", sid[:8]], env_db),
        (f"chronicle history {sid[:8]}", [*_chronicle(), "history", sid[:8]], env_db),
    ]
    if ctx.pg is not None and "postgres" in ctx.plan.backends:
        pg_url = _pg_copy(ctx, env, url, sid)
        cases.append(("chronicle sessions (PostgreSQL)", [*_chronicle(), "sessions"], {**env, "CHRONICLE_DB": pg_url}))
    rows = []
    floor = None
    for label, argv, case_env in cases:
        _time(argv, case_env, 1)  # warm the page cache and bytecode
        wall, wall_min, cpu, cpu_min = _time(argv, case_env, runs)
        floor = floor if floor is not None else wall_min
        log(f"  {label}: wall {wall:.0f} ms (min {wall_min:.0f}), cpu {cpu:.0f} ms (min {cpu_min:.0f})")
        rows.append([label, wall, wall_min, cpu, cpu_min, ratio(wall_min, floor)])
    s.note(f"{runs} runs each after one warm-up; the store is the demo's (one session, two turns, tools). "
           "Target (issue 12): < 150 ms wall for read-only commands on an idle machine. Load average at the start of "
           f"this section: {', '.join(f'{x:.2f}' for x in os.getloadavg())}.")
    s.table(["command", "wall median (ms)", "wall min (ms)", "CPU median (ms)", "CPU min (ms)", "min ÷ floor"], rows)
    breakdown = _imports(["sessions"], env_db)
    total = sum(ms for _, ms in breakdown)
    s.note(f"Where `chronicle sessions` spends its imports (`python -X importtime`, self time by package, {total:.0f} ms in all, "
           "inflated by the tracing itself):")
    s.table(["package", "ms", "share"], [[name, ms, f"{ms / total:.0%}"] for name, ms in breakdown[:12]])
    s.data = {"rows": rows, "imports": breakdown[:30], "runs": runs}
    return [s]


def _pg_copy(ctx: Context, env: dict[str, str], sqlite_url: str, sid: str) -> str:
    """The demo's session moved to a fresh PostgreSQL schema with `chronicle export` / `import`."""
    pg_url = f"{ctx.pg.base}?schema={ctx.pg.new_schema()}"
    bundle = ctx.scratch / "startup-bundle.json"
    subprocess.run([*_chronicle(), "export", sid, "--out", str(bundle)], env={**env, "CHRONICLE_DB": sqlite_url}, check=True, capture_output=True)
    subprocess.run([*_chronicle(), "import", str(bundle)], env={**env, "CHRONICLE_DB": pg_url}, check=True, capture_output=True)
    return pg_url
