"""Section 3: waits for time travel / fork (issue 5); says so instead of printing numbers."""

from __future__ import annotations

from typing import Callable

from common import Context, Section
from pending import missing


def run(ctx: Context, log: Callable[[str], None]) -> list[Section]:
    s = Section("timetravel", "3. Time travel: conversation as of a turn, history of states, fork")
    gap = missing(s, "chronicle.runtime.timetravel", "time travel / fork (issue 5)")
    if gap is not None:
        log(f"  {s.data['unavailable']}")
        return [gap]
    return [s.unavailable("the feature has landed but this section's measurement is not written yet")]
