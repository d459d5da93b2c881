"""The cost guard's reader: spend figures from the cost projection, the one path to a cost figure.

Handed to the loop's guards by the loop factory, so the loop never catches projections up or
queries them itself; `chronicle cost`, chat's /cost and the budget all read the same rows.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from chronicle.projections.sql import iso

from ..guards import Spend
from ..read_models import projection_engine
from ..store import ChronicleStore


class ProjectionSpend:
    def __init__(self, store: ChronicleStore) -> None:
        self.store = store

    def spend(self, session_id: str, now: datetime) -> Spend:
        engine = projection_engine(self.store)
        engine.catch_up(["cost"])
        with engine.read() as tx:
            day = float(tx.value("SELECT SUM(COALESCE(usd, 0)) FROM proj_cost_calls WHERE day = %s", (iso(now)[:10],)) or 0)
            recent = int(tx.value("SELECT COUNT(*) FROM proj_cost_calls WHERE at > %s", (iso(now - timedelta(hours=1)),)) or 0)
            return Spend(tree_usd=tree_spend(tx, session_id), day_usd=day, calls_last_hour=recent)


def tree_spend(tx: Any, session_id: str) -> float:
    """USD of the session's whole tree: its top-level ancestor and every sub-agent below it."""
    root, seen = session_id, {session_id}
    while True:
        parent = tx.value("SELECT parent_session_id FROM proj_cost_sessions WHERE session_id = %s", (root,))
        if not parent or parent in seen:
            break
        root = parent
        seen.add(parent)
    tree, frontier = [root], [root]
    while frontier:
        marks = ", ".join(["%s"] * len(frontier))
        children = [r[0] for r in tx.rows(f"SELECT session_id FROM proj_cost_sessions WHERE parent_session_id IN ({marks})", frontier)]
        frontier = [c for c in children if c not in tree]
        tree += frontier
    marks = ", ".join(["%s"] * len(tree))
    return float(tx.value(f"SELECT SUM(COALESCE(usd, 0)) FROM proj_cost_calls WHERE session_id IN ({marks})", tree) or 0)
