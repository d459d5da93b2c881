"""Section 7: waits for `chronicle worker` (issue 5); says so instead of printing numbers."""

from __future__ import annotations

from typing import Callable

from common import Context, Section
from pending import missing


def run(ctx: Context, log: Callable[[str], None]) -> list[Section]:
    s = Section("workers", "7. Workers (PostgreSQL): turns per second with 1, 2, 4 worker processes")
    gap = missing(s, "chronicle.runtime.worker", "`chronicle worker` (issue 5)")
    if gap is not None:
        log(f"  {s.data['unavailable']}")
        return [gap]
    return [s.unavailable("the feature has landed but this section's measurement is not written yet")]
