"""Where Chronicle's loop spends its time at 1,000 steps (SQLite): pyinstrument's top frames.

Wall time on this machine is dominated by fsync in COMMIT; the profile shows what the
runtime adds around it. CPU time per step is reported next to wall time for that reason.
"""

from __future__ import annotations

import time
from typing import Callable

import chronicle_side as cs
from common import Context, Section


def run(ctx: Context, log: Callable[[str], None]) -> list[Section]:
    s = Section("profile", "Profile: Chronicle's loop at 1,000 steps (SQLite)")
    try:
        from pyinstrument import Profiler
    except ImportError:
        return [s.unavailable("pyinstrument is not installed (install the bench group: make bench)")]
    steps = 1000
    d = ctx.scratch / "profile"
    d.mkdir()
    (d / "ws").mkdir()
    store = cs.store_for("sqlite", d)
    loop, sid = cs.prepare(store, steps, d / "ws")
    profiler = Profiler(interval=0.001)
    cpu0 = time.process_time()
    profiler.start()
    wall = cs.drive(loop, sid)
    profiler.stop()
    cpu = time.process_time() - cpu0
    store.close()
    per_wall, per_cpu = wall * 1000 / (steps + 1), cpu * 1000 / (steps + 1)
    log(f"  profiled: {per_wall:.2f} ms/step wall, {per_cpu:.2f} ms/step CPU")
    text = profiler.output_text(unicode=False, color=False, show_all=False)
    lines = [ln for ln in text.splitlines() if ln.strip()][:45]
    s.note(f"{per_wall:.2f} ms per step wall clock, {per_cpu:.2f} ms per step CPU (this process, profiler included).")
    s.lines.extend(["```", *lines, "```", ""])
    s.data = {"wall_ms_per_step": per_wall, "cpu_ms_per_step": per_cpu}
    return [s]
