"""Section 5: waits for projection rebuild (issue 4); says so instead of printing numbers."""

from __future__ import annotations

from typing import Callable

from common import Context, Section
from pending import missing


def run(ctx: Context, log: Callable[[str], None]) -> list[Section]:
    s = Section("rebuild", "5. Projection rebuild: events per second over >= 100k events")
    gap = missing(s, "chronicle.projections.runner", "projection rebuild (issue 4)")
    if gap is not None:
        log(f"  {s.data['unavailable']}")
        return [gap]
    return [s.unavailable("the feature has landed but this section's measurement is not written yet")]
