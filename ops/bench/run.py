"""`make bench` / `make bench-quick`: run every section in this one process tree, write RESULTS.md.

    python ops/bench/run.py [--quick] [--sections loop,timetravel,...] [--backends sqlite,postgres] [--out PATH]

Sections that need a feature this checkout lacks print "not available: <reason>" instead of
numbers. PostgreSQL comes from CHRONICLE_BENCH_PG (default postgresql://postgres@127.0.0.1:5432/postgres):
one fresh database per run, dropped at the end.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import tempfile
import time
import traceback
from datetime import datetime, timezone
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import targets  # noqa: E402
from common import ADMIN_DSN, Context, PgServer, Plan, Section, machine  # noqa: E402
from report import write_results  # noqa: E402

#: section key -> module; each module's run(ctx, log) returns a list of Sections.
SECTIONS = {
    "loop": "sec_loop",          # 1 loop overhead + 2 storage
    "timetravel": "sec_timetravel",  # 3
    "resume": "sec_resume",      # 4
    "rebuild": "sec_rebuild",    # 5
    "streaming": "sec_streaming",  # 6
    "workers": "sec_workers",    # 7
    "profile": "sec_profile",    # where the time goes
    "startup": "sec_startup",    # 8 CLI start-up
}


#: Other spellings of a backend's name.
BACKEND_NAMES = {"postgresql": "postgres", "pg": "postgres", "sqlite3": "sqlite"}


def log(message: str) -> None:
    print(message, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and repeats: under 3 minutes")
    parser.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated subset of {', '.join(SECTIONS)}")
    parser.add_argument("--backends", default="sqlite,postgres", help="comma-separated subset of sqlite, postgres")
    parser.add_argument("--out", default=str(HERE / "RESULTS.md"))
    args = parser.parse_args(argv)
    wanted = tuple(s.strip() for s in args.sections.split(",") if s.strip())
    unknown = [s for s in wanted if s not in SECTIONS]
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}; choose from {', '.join(SECTIONS)}")
    # "postgresql" is what the store's URLs say: taken as "postgres", not run as an unknown backend.
    backends = tuple(dict.fromkeys(BACKEND_NAMES.get(b.strip(), b.strip()) for b in args.backends.split(",") if b.strip()))
    odd = [b for b in backends if b not in ("sqlite", "postgres")]
    if odd or not backends:
        parser.error(f"unknown backend(s): {', '.join(odd) or '(none given)'}; choose from sqlite, postgres")
    plan = Plan.make(args.quick, wanted, backends)
    facts = machine()
    started = time.perf_counter()
    pg, pg_missing = None, ""
    if "postgres" in plan.backends:
        try:
            pg = PgServer(ADMIN_DSN)
        except Exception as exc:  # noqa: BLE001
            pg_missing = f"PostgreSQL unreachable at {ADMIN_DSN}: {exc}"
            log(f"!!! {pg_missing}")
    sections: list[Section] = []
    try:
        with tempfile.TemporaryDirectory(prefix="chronicle-bench-") as scratch:
            ctx = Context(plan=plan, pg=pg, pg_missing=pg_missing, scratch=Path(scratch))
            for key in wanted:
                log(f"== {key}")
                t0 = time.perf_counter()
                try:
                    module = importlib.import_module(SECTIONS[key])
                    sections.extend(module.run(ctx, log))
                except Exception as exc:  # noqa: BLE001 - one broken section must not lose the others
                    traceback.print_exc()
                    sections.append(Section(key, key).unavailable(f"the section failed: {type(exc).__name__}: {exc}"))
                log(f"   ({time.perf_counter() - t0:.1f} s)")
    finally:
        if pg is not None:
            pg.close()
    sections.append(targets.section({s.key: s.data for s in sections}))  # judged from the numbers above
    elapsed = time.perf_counter() - started
    meta = {
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "mode": "bench-quick" if plan.quick else "bench (full)",
        "elapsed_s": round(elapsed, 1),
        "steps": list(plan.steps),
        "repeats": {str(k): v for k, v in plan.repeats.items() if k in plan.steps},
        **facts,
    }
    out = Path(args.out)
    write_results(out, meta, sections)
    out.with_suffix(".json").write_text(json.dumps({"meta": meta, "sections": {s.key: s.data for s in sections}}, indent=1, default=str))
    log(f"wrote {out} in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
