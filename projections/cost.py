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

from datetime import date
from typing import Any, Callable, Mapping

from chronicle.domain.session import Session
from chronicle.domain.turn import Turn

from .base import Projection, on
from .cost_report import COST_VERSION, COUNTS, TOKEN_KINDS, CostReport, call_costs
from .sql import Tx, iso

__all__ = ["COUNTS", "TOKEN_KINDS", "CostProjection", "CostReport", "Pricer", "call_costs", "no_prices"]

Pricer = Callable[[str, Mapping[str, Any], date], "float | None"]


def no_prices(model: str, usage: Mapping[str, Any], at: date) -> float | None:
    return None


class CostProjection(Projection):
    name = "cost"
    #: Kept in cost_report.py, whose reader checks this projection's position without importing it.
    version = COST_VERSION
    tables = {
        "proj_cost_sessions": "session_id TEXT PRIMARY KEY, parent_session_id TEXT, agent TEXT, model TEXT, created_at TEXT, "
                              "instance TEXT",
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
        tx.execute("INSERT INTO proj_cost_sessions VALUES (%s, %s, %s, %s, %s, %s)",
                   (str(e.originator_id), parent, spec.get("name"), spec.get("model"), iso(e.timestamp), spec.get("instance") or None))

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

    @on(Turn.IterationsCompacted, Turn.IterationCompactionFailed)
    def _steps_summarised(self, tx: Tx, e: Any, position: int) -> None:
        """The summary call that compacted (or failed to compact) a running turn's own steps."""
        tid = str(e.originator_id)
        key = ("cost.turn", tid)
        if key not in tx.memo:
            tx.memo[key] = tx.value("SELECT session_id FROM proj_cost_turns WHERE turn_id = %s", (tid,))
        self._record(tx, e, tx.memo[key], tid, "auxiliary", e.model or "", e.usage or {})

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
