"""`CostReport.total_usd` (each row of `sessions`) adds only the two figures it needs; it must give
exactly what the full report's "total" gives (`all_sessions`, `cost --json`) for the same session,
sub-agents rolled up and unpriced calls making it unknown."""

from __future__ import annotations

from typing import Any, Sequence

from hypothesis import given
from hypothesis import strategies as st

from chronicle.projections.cost_report import COUNTS, CostReport


class Tables:
    """The two reads CostReport makes, answered from lists (the SQL sums are the database's part)."""

    def __init__(self, sessions: list[dict[str, Any]], sums: list[dict[str, Any]]) -> None:
        self.sessions, self.sums = sessions, sums

    def dicts(self, sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
        return self.sessions if "proj_cost_sessions" in sql else self.sums


@st.composite
def forests(draw: st.DrawFn) -> Tables:
    count = draw(st.integers(1, 8))
    ids = [f"s{i}" for i in range(count)]
    sessions = [{"session_id": sid, "parent_session_id": draw(st.sampled_from([None, *ids[:i]])), "agent": "a",
                 "instance": None, "created_at": str(i)} for i, sid in enumerate(ids)]
    sums = []
    for sid in draw(st.lists(st.sampled_from(ids), unique=True)):
        calls = draw(st.integers(1, 5))
        sums.append({"session_id": sid, **{k: draw(st.integers(0, 10_000)) for k in COUNTS},
                     "usd": draw(st.floats(0, 3, allow_nan=False)), "calls": calls, "unpriced_calls": draw(st.integers(0, calls) | st.just(0))})
    return Tables(sessions, sums)


@given(forests())
def test_each_sessions_total_is_the_reports_total(tables: Tables) -> None:
    report = CostReport(tables)
    totals = {o["session_id"]: o["usd"] for o in report.all_sessions()}
    assert {s["session_id"]: report.total_usd(s["session_id"]) for s in tables.sessions} == totals
    unpriced = {r["session_id"] for r in tables.sums if r["unpriced_calls"]}
    for sid, usd in totals.items():  # the cases are there: unknown wherever an unpriced call is in the tree
        assert (usd is None) == bool(({sid, *report.descendants(sid)}) & unpriced)
