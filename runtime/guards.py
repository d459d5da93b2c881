"""Guards written as hooks: cost and rate limits, a per-turn tool-call limit, the doom loop.

Each guard reads what is recorded (usage of every model call, the turn's tool calls), never
a counter kept in memory, so a resumed process or a second worker sees the same totals. A
guard that trips returns Stop; the loop records it on the turn (`Stopped` with guard and
reason), emits an error event, and `run` exits with 4.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Iterator
from uuid import UUID

from chronicle.projections.sql import iso

from .clock import SYSTEM_CLOCK, Clock
from .hooks import Hook, NeedApproval, Stop, ToolVerdict
from .pricing import price
from .read_models import projection_engine

DOOM_LOOP_THRESHOLD = 3


@dataclass(frozen=True)
class CallRecord:
    """One model call as the cost guard sees it."""

    at: datetime
    model: str
    usage: dict[str, Any]

    @property
    def usd(self) -> float | None:
        return price(self.model, self.usage, self.at)


def turn_calls(turn: Any) -> list[CallRecord]:
    calls = []
    for step in turn.steps:
        response = step["response"]
        at = datetime.fromisoformat(step["at"]) if step.get("at") else turn.started_at
        calls.append(CallRecord(at=at, model=response.get("model") or "", usage=response.get("usage") or {}))
    return calls


def session_calls(store: Any, session: Any, finished: dict[UUID, list[CallRecord]] | None = None) -> Iterator[CallRecord]:
    """Every model call of the session: its turns (on any branch) and its auxiliary calls."""
    for turn_id in session.turns:
        if finished is not None and turn_id in finished:
            yield from finished[turn_id]
            continue
        turn = store.turn(turn_id)
        calls = turn_calls(turn)
        if finished is not None and turn.finished:
            finished[turn_id] = calls
        yield from calls
    for aux in getattr(session, "aux_calls", []):
        yield CallRecord(at=datetime.fromisoformat(aux["at"]), model=aux.get("model") or "", usage=aux.get("usage") or {})


def spend(calls: Iterator[CallRecord] | list[CallRecord]) -> tuple[float, int]:
    """USD of the calls, and how many could not be priced (unknown model)."""
    total, unknown = 0.0, 0
    for call in calls:
        usd = call.usd
        if usd is None:
            unknown += 1 if (call.usage.get("input_tokens") or call.usage.get("output_tokens")) else 0
        else:
            total += usd
    return total, unknown


class CostGuard(Hook):
    """Per-session and daily USD budgets and an hourly model-call rate, checked before each call.

    Spend is read from the cost projection (the same rows `chronicle cost` reports), caught up
    first so it includes every call committed so far: one query per figure instead of loading
    every session's turns on every model call. A session budget covers the whole tree the
    session belongs to: its top-level session and every sub-agent below it, as `cost`'s
    "total" shows it — a budget given to `run` bounds what the run spends, children included.
    The daily budget and the hourly rate count every session in the store (one store, one
    bill); the rate counts the calls that used tokens (model calls and auxiliary calls).
    """

    def __init__(
        self, store: Any, budget_usd: float | None = None, daily_budget_usd: float | None = None,
        max_calls_per_hour: int | None = None, clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.store = store
        self.budget_usd = budget_usd
        self.daily_budget_usd = daily_budget_usd
        self.max_calls_per_hour = max_calls_per_hour
        self.clock = clock

    async def before_model_call(self, session: Any, turn: Any, request: Any) -> Stop | None:
        now = self.clock.now()
        engine = projection_engine(self.store)
        engine.catch_up(["cost"])
        with engine.read() as tx:
            if self.budget_usd is not None:
                spent = tree_spend(tx, str(session.id))
                if spent >= self.budget_usd:
                    return Stop("budget", f"session budget reached: ${spent:.4f} spent of ${self.budget_usd:g} (--budget-usd)")
            if self.daily_budget_usd is not None:
                spent = float(tx.value("SELECT SUM(COALESCE(usd, 0)) FROM proj_cost_calls WHERE day = %s", (iso(now)[:10],)) or 0)
                if spent >= self.daily_budget_usd:
                    return Stop(
                        "daily_budget",
                        f"daily budget reached: ${spent:.4f} spent today (UTC) of ${self.daily_budget_usd:g} (--daily-budget-usd)",
                    )
            if self.max_calls_per_hour is not None:
                recent = int(tx.value("SELECT COUNT(*) FROM proj_cost_calls WHERE at > %s", (iso(now - timedelta(hours=1)),)) or 0)
                if recent >= self.max_calls_per_hour:
                    return Stop(
                        "rate",
                        f"model-call rate reached: {recent} call(s) in the last hour, limit {self.max_calls_per_hour} (--max-calls-per-hour)",
                    )
        return None


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


def _tool_uses_before(turn: Any, call: Any) -> list[tuple[str, str]]:
    """(name, canonical input) of the turn's tool calls before ``call``, in the model's order."""
    seen = []
    for step in turn.steps:
        for block in step["response"].get("content", []):
            if block.get("type") != "tool_use":
                continue
            if step["step"] == call.step and block["id"] == call.tool_use_id:
                return seen
            seen.append((block["name"], json.dumps(block.get("input", {}), sort_keys=True)))
    return seen


class ToolCallLimit(Hook):
    """At most N tool calls in one turn; the next one stops the turn."""

    def __init__(self, max_tool_calls: int) -> None:
        self.max_tool_calls = max_tool_calls

    async def before_tool_call(self, session: Any, turn: Any, call: Any) -> ToolVerdict:
        position = len(_tool_uses_before(turn, call)) + 1
        if position > self.max_tool_calls:
            return Stop(
                "tool_calls",
                f"tool-call limit reached: {self.max_tool_calls} per turn (--max-tool-calls); {call.name} was not run",
            )
        return None


class DoomLoopGuard(Hook):
    """The same tool with the same input N times in a row: ask a person, or stop if none is there."""

    def __init__(self, interactive: bool, threshold: int = DOOM_LOOP_THRESHOLD) -> None:
        self.interactive = interactive
        self.threshold = threshold

    async def before_tool_call(self, session: Any, turn: Any, call: Any) -> ToolVerdict:
        previous = _tool_uses_before(turn, call)[-(self.threshold - 1):]
        this = (call.name, json.dumps(call.input, sort_keys=True))
        if len(previous) < self.threshold - 1 or any(p != this for p in previous):
            return None
        reason = f"doom loop: {call.name} called {self.threshold} times in a row with the same input"
        if self.interactive:
            return NeedApproval(reason)
        return Stop("doom_loop", reason)


def guard_hooks(
    store: Any, *, interactive: bool, budget_usd: float | None = None, daily_budget_usd: float | None = None,
    max_calls_per_hour: int | None = None, max_tool_calls: int | None = None, clock: Clock = SYSTEM_CLOCK,
) -> list[Hook]:
    """The standard guards for a loop; the doom-loop guard is always on."""
    hooks: list[Hook] = [DoomLoopGuard(interactive=interactive)]
    if max_tool_calls is not None:
        hooks.append(ToolCallLimit(max_tool_calls))
    if budget_usd is not None or daily_budget_usd is not None or max_calls_per_hour is not None:
        hooks.append(CostGuard(store, budget_usd, daily_budget_usd, max_calls_per_hour, clock=clock))
    return hooks
