"""Cost: tokens by kind and USD per model call, summed per session, model and day.

Rows keep the raw token counts of each call; USD is computed when the row is written from a
dated price table handed in as `pricer` (priced at the call's own date), so re-pricing is a
rebuild. The pricer gets the usage exactly as recorded (the 5m/1h cache-write split, server
tool requests, service tier), so all of it is priced; a retried attempt whose stream broke
after message_start was billed too, and its usage (kept on the retry event) is a row of its own.
Sub-agent sessions are linked to their parent by `parent_session_id`; totals roll a
session's descendants up into it when the report is asked for, so a late child is never missed.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import date
from typing import Any, Callable, Mapping

from chronicle.domain.session import Session
from chronicle.domain.turn import Turn

from .base import Projection, on
from .sql import Tx, iso

TOKEN_KINDS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
#: Counted and reported beside the tokens: server-side tool requests, billed per request.
REQUEST_KINDS = ("web_search_requests",)
COUNTS = (*TOKEN_KINDS, *REQUEST_KINDS)
Pricer = Callable[[str, Mapping[str, Any], date], "float | None"]


def no_prices(model: str, usage: Mapping[str, Any], at: date) -> float | None:
    return None


class CostProjection(Projection):
    name = "cost"
    #: v2: web_search_requests column, full usage priced, retried attempts' usage counted.
    version = 2
    tables = {
        "proj_cost_sessions": "session_id TEXT PRIMARY KEY, parent_session_id TEXT, agent TEXT, model TEXT, created_at TEXT",
        "proj_cost_turns": "turn_id TEXT PRIMARY KEY, session_id TEXT",
        "proj_cost_calls": "call_key TEXT PRIMARY KEY, session_id TEXT, turn_id TEXT, source TEXT, model TEXT, day TEXT, "
                           "at TEXT, input_tokens BIGINT, output_tokens BIGINT, cache_creation_input_tokens BIGINT, "
                           "cache_read_input_tokens BIGINT, web_search_requests BIGINT, usd DOUBLE PRECISION",
    }

    def __init__(self, pricer: Pricer = no_prices) -> None:
        super().__init__()
        self.pricer = pricer

    @on(Session.Started)
    def _started(self, tx: Tx, e: Any, position: int) -> None:
        spec = e.spec or {}
        parent = str(e.parent_session_id) if e.parent_session_id else None
        tx.execute("INSERT INTO proj_cost_sessions VALUES (%s, %s, %s, %s, %s)",
                   (str(e.originator_id), parent, spec.get("name"), spec.get("model"), iso(e.timestamp)))

    @on(Turn.Created)
    def _turn(self, tx: Tx, e: Any, position: int) -> None:
        tx.execute("INSERT INTO proj_cost_turns VALUES (%s, %s)", (str(e.originator_id), str(e.session_id)))
        tx.memo[("cost.turn", str(e.originator_id))] = str(e.session_id)

    @on(Turn.ModelResponded)
    def _responded(self, tx: Tx, e: Any, position: int) -> None:
        tid = str(e.originator_id)
        key = ("cost.turn", tid)
        if key not in tx.memo:
            tx.memo[key] = tx.value("SELECT session_id FROM proj_cost_turns WHERE turn_id = %s", (tid,))
        sid = tx.memo[key]
        self._record(tx, e, sid, tid, "model_call", e.response.get("model") or "", e.response.get("usage") or {})

    @on(Turn.ModelCallRetried)
    def _retried(self, tx: Tx, e: Any, position: int) -> None:
        error = e.error or {}
        if not isinstance(error.get("usage"), dict):
            return
        tid = str(e.originator_id)
        key = ("cost.turn", tid)
        if key not in tx.memo:
            tx.memo[key] = tx.value("SELECT session_id FROM proj_cost_turns WHERE turn_id = %s", (tid,))
        self._record(tx, e, tx.memo[key], tid, "failed_attempt", error.get("model") or "", error["usage"])

    @on(Session.TitleSet, Session.TitleFailed)
    def _title(self, tx: Tx, e: Any, position: int) -> None:
        self._record(tx, e, str(e.originator_id), None, "title", e.model or "", e.usage or {})

    def unhandled(self, tx: Tx, e: Any, position: int) -> None:
        usage = getattr(e, "usage", None)
        if isinstance(e, Session.Event) and isinstance(usage, dict):
            self._record(tx, e, str(e.originator_id), None, "auxiliary", getattr(e, "model", "") or "", usage)

    def _record(
        self, tx: Tx, e: Any, sid: str | None, tid: str | None, source: str, model: str, usage: Mapping[str, Any]
    ) -> None:
        counts = {k: _int(usage.get(k)) for k in TOKEN_KINDS}
        server = usage.get("server_tool_use")
        counts["web_search_requests"] = _int(server.get("web_search_requests")) if isinstance(server, dict) else 0
        if sid is None or not any(counts.values()):
            return
        if not model:
            model = tx.value("SELECT model FROM proj_cost_sessions WHERE session_id = %s", (sid,)) or ""
        at = e.timestamp
        usd = self.pricer(model, usage, at.date())
        tx.insert_later(  # no handler reads proj_cost_calls
            "INSERT INTO proj_cost_calls VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            (f"{e.originator_id}/{e.originator_version}", sid, tid, source, model, iso(at)[:10], iso(at),
             *(counts[k] for k in COUNTS), usd),
        )


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


# -- reports -------------------------------------------------------------------------------------


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

    def __init__(self, tx: Tx, by: str | None = None) -> None:
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
        base = {"scope": scope, "session_id": sid, "parent_session_id": info.get("parent_session_id"), "agent": info.get("agent")}
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
        figures = self._sum([sid, *self.descendants(sid)])
        merged = _blank()
        for f in figures.values():
            _add(merged, f)
        return _finish(merged)["usd"]


def call_costs(tx: Tx, session: str) -> list[float | None]:
    """USD of each of the session's own priced-or-not calls, in time order (the viewer's cost plot)."""
    return [r["usd"] for r in tx.dicts("SELECT usd FROM proj_cost_calls WHERE session_id = %s ORDER BY at, call_key", (session,))]
