"""Cost reports: the cost projection's tables summed per session, with sub-agents rolled up.

Apart from `cost.py` (the handlers that write the tables, which import the domain's event
classes) so that `chronicle sessions` can read a session's USD over a bare connection without
building those classes (session_listing.py). The version of the tables lives here for the same
reason: the reader checks the projection's tracking key without importing the projection.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any, Mapping, Protocol, Sequence

#: The cost projection's version (CostProjection.version): bump it when its tables change.
#: v2: web_search_requests column, full usage priced, retried attempts' usage counted; v3: a sub-agent's instance name.
COST_VERSION = 3
COST_KEY = f"projection:cost:v{COST_VERSION}"

TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
#: Counted and reported beside the tokens: server-side tool requests, billed per request.
REQUEST_KINDS = ("web_search_requests",)
COUNTS = (*TOKEN_KINDS, *REQUEST_KINDS)


class Rows(Protocol):
    """What a report reads through: a projection transaction (sql.Tx) or a bare connection."""

    def dicts(self, sql: str, params: Sequence[Any] = ...) -> list[dict[str, Any]]: ...


def _blank() -> dict[str, Any]:
    return {**{k: 0 for k in COUNTS}, "usd": 0.0, "calls": 0, "unpriced_calls": 0}


def _add(into: dict[str, Any], row: Mapping[str, Any]) -> None:
    for k in COUNTS:
        into[k] += row[k]
    into["usd"] += row["usd"]
    into["calls"] += row["calls"]
    into["unpriced_calls"] += row["unpriced_calls"]


def _finish(figures: dict[str, Any]) -> dict[str, Any]:
    out = dict(figures)
    out["usd"] = None if out["unpriced_calls"] else round(out["usd"], 6)
    return out


class CostReport:
    """Per-session sums, with the parent links to roll sub-agents up."""

    def __init__(self, tx: Rows, by: str | None = None) -> None:
        if by not in (None, "model", "day"):
            raise ValueError(f"cannot group cost by {by!r}; use model or day")
        self.by = by
        self.sessions = tx.dicts("SELECT * FROM proj_cost_sessions ORDER BY created_at, session_id")
        self.parent = {s["session_id"]: s["parent_session_id"] for s in self.sessions}
        self.info = {s["session_id"]: s for s in self.sessions}
        self.children: dict[str, list[str]] = defaultdict(list)
        for s in self.sessions:
            if s["parent_session_id"] in self.info:
                self.children[s["parent_session_id"]].append(s["session_id"])
        group = f", {by}" if by else ""
        rows = tx.dicts(
            f"SELECT session_id{group}, SUM(input_tokens) AS input_tokens, SUM(output_tokens) AS output_tokens, "
            "SUM(cache_creation_input_tokens) AS cache_creation_input_tokens, "
            "SUM(cache_read_input_tokens) AS cache_read_input_tokens, SUM(web_search_requests) AS web_search_requests, "
            "SUM(COALESCE(usd, 0)) AS usd, COUNT(*) AS calls, "
            f"SUM(CASE WHEN usd IS NULL THEN 1 ELSE 0 END) AS unpriced_calls FROM proj_cost_calls GROUP BY session_id{group}"
        )
        self.own: dict[str, dict[Any, dict[str, Any]]] = defaultdict(dict)
        for row in rows:
            key = row.get(by) if by else None
            figures = _blank()
            _add(figures, {k: (int(row[k] or 0) if k != "usd" else float(row[k] or 0)) for k in (*COUNTS, "usd", "calls", "unpriced_calls")})
            self.own[row["session_id"]][key] = figures

    def descendants(self, sid: str) -> list[str]:
        found, stack = [], list(self.children.get(sid, []))
        while stack:
            child = stack.pop(0)
            if child in found or child == sid:
                continue
            found.append(child)
            stack.extend(self.children.get(child, []))
        return found

    def _sum(self, sids: list[str]) -> dict[Any, dict[str, Any]]:
        out: dict[Any, dict[str, Any]] = {}
        for sid in sids:
            for key, figures in self.own.get(sid, {}).items():
                _add(out.setdefault(key, _blank()), figures)
        if self.by is None and None not in out:
            out[None] = _blank()
        return out

    def _objects(self, scope: str, sid: str, grouped: dict[Any, dict[str, Any]]) -> list[dict[str, Any]]:
        info = self.info.get(sid, {})
        base = {"scope": scope, "session_id": sid, "parent_session_id": info.get("parent_session_id"), "agent": info.get("agent"),
                **({"instance": info["instance"]} if info.get("instance") else {})}  # seed 004: which of its agent's children
        return [{**base, **({self.by: key} if self.by else {}), **_finish(f)} for key, f in sorted(grouped.items(), key=lambda kv: str(kv[0]))]

    def for_session(self, sid: str) -> list[dict[str, Any]]:
        """Its own figures, its total with every sub-agent below it, and one object per child."""
        objects = self._objects("self", sid, self._sum([sid]))
        objects += self._objects("total", sid, self._sum([sid, *self.descendants(sid)]))
        for child in self.children.get(sid, []):
            objects += self._objects("child", child, self._sum([child, *self.descendants(child)]))
        return objects

    def all_sessions(self) -> list[dict[str, Any]]:
        """One object per session: its total, sub-agents included (sum only roots for a grand total)."""
        objects = []
        for s in self.sessions:
            sid = s["session_id"]
            objects += self._objects("total", sid, self._sum([sid, *self.descendants(sid)]))
        return objects

    def total_usd(self, sid: str) -> float | None:
        if self.by is None:  # one group per session: only the two figures the answer needs, added in the same order
            usd, unpriced = 0.0, 0
            for one in (sid, *self.descendants(sid)):
                for figures in self.own.get(one, {}).values():
                    usd += figures["usd"]
                    unpriced += figures["unpriced_calls"]
            return None if unpriced else round(0.0 + usd, 6)
        figures = self._sum([sid, *self.descendants(sid)])
        merged = _blank()
        for f in figures.values():
            _add(merged, f)
        return _finish(merged)["usd"]


def call_costs(tx: Rows, session: str) -> list[float | None]:
    """USD of each of the session's own priced-or-not calls, in time order (the viewer's cost plot)."""
    return [r["usd"] for r in tx.dicts("SELECT usd FROM proj_cost_calls WHERE session_id = %s ORDER BY at, call_key", (session,))]
