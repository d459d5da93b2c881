"""Guards written as hooks: cost and rate limits, a per-turn tool-call limit, the doom loop.

Each guard reads what is recorded (usage of every model call, the turn's tool calls), never
a counter kept in memory, so a resumed process or a second worker sees the same totals. A
guard that trips returns Stop; the loop records it on the turn (`Stopped` with guard and
reason), emits an error event, and `run` exits with 4.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from .clock import SYSTEM_CLOCK, Clock
from .hooks import Hook, NeedApproval, Stop, ToolVerdict
from .limit_flags import DEFAULT_DOOM_LOOP

DOOM_LOOP_THRESHOLD = DEFAULT_DOOM_LOOP


@dataclass(frozen=True)
class Spend:
    """What the cost guard compares with its limits, read at one moment."""

    #: USD of the session's whole tree: its top-level ancestor and every sub-agent below it.
    tree_usd: float
    #: USD of every session in the store today (UTC).
    day_usd: float
    #: Calls that used tokens in the last hour, every session.
    calls_last_hour: int


class SpendReader(Protocol):
    """Where the cost guard reads spend: the application hands one over (the cost projection's queries)."""

    def spend(self, session_id: str, now: datetime) -> Spend: ...


class CostGuard(Hook):
    """Per-session and daily USD budgets and an hourly model-call rate, checked before each call.

    Spend comes from the reader the application hands over — the cost projection (the same
    rows `chronicle cost` reports), caught up first so it includes every call committed so far —
    instead of loading every session's turns on every model call. A session budget covers the whole tree the
    session belongs to: its top-level session and every sub-agent below it, as `cost`'s
    "total" shows it — a budget given to `run` bounds what the run spends, children included.
    The daily budget and the hourly rate count every session in the store (one store, one
    bill); the rate counts the calls that used tokens (model calls and auxiliary calls).
    """

    def __init__(
        self, reader: SpendReader, budget_usd: float | None = None, daily_budget_usd: float | None = None,
        max_calls_per_hour: int | None = None, clock: Clock = SYSTEM_CLOCK, sources: dict[str, str] | None = None,
    ) -> None:
        self.reader = reader
        self.budget_usd = budget_usd
        self.daily_budget_usd = daily_budget_usd
        self.max_calls_per_hour = max_calls_per_hour
        self.clock = clock
        #: Where each limit was set, as the stop reason names it (a flag, chronicle.toml, the session's record).
        self.sources = {"budget_usd": "--budget-usd", "daily_budget_usd": "--daily-budget-usd",
                        "max_calls_per_hour": "--max-calls-per-hour", **(sources or {})}

    async def before_model_call(self, session: Any, turn: Any, request: Any) -> Stop | None:
        spent = self.reader.spend(str(session.id), self.clock.now())
        if self.budget_usd is not None and spent.tree_usd >= self.budget_usd:
            return Stop("budget", f"session budget reached: ${spent.tree_usd:.4f} spent of ${self.budget_usd:g} ({self.sources['budget_usd']})")
        if self.daily_budget_usd is not None and spent.day_usd >= self.daily_budget_usd:
            return Stop(
                "daily_budget",
                f"daily budget reached: ${spent.day_usd:.4f} spent today (UTC) of ${self.daily_budget_usd:g} ({self.sources['daily_budget_usd']})",
            )
        if self.max_calls_per_hour is not None and spent.calls_last_hour >= self.max_calls_per_hour:
            return Stop(
                "rate",
                f"model-call rate reached: {spent.calls_last_hour} call(s) in the last hour, "
                f"limit {self.max_calls_per_hour} ({self.sources['max_calls_per_hour']})",
            )
        return None


def _tool_uses_before(turn: Any, call: Any) -> list[tuple[str, str]]:
    """(name, canonical input) of the turn's tool calls before ``call``, in the model's order."""
    seen: list[tuple[str, str]] = []
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

    def __init__(self, max_tool_calls: int, source: str = "--max-tool-calls") -> None:
        self.max_tool_calls = max_tool_calls
        self.source = source

    async def before_tool_call(self, session: Any, turn: Any, call: Any) -> ToolVerdict:
        position = len(_tool_uses_before(turn, call)) + 1
        if position > self.max_tool_calls:
            return Stop(
                "tool_calls",
                f"tool-call limit reached: {self.max_tool_calls} per turn ({self.source}); {call.name} was not run",
            )
        return None


class DoomLoopGuard(Hook):
    """The same tool with the same input N times in a row: ask a person, or stop if none is there.

    N comes from the settings (`--doom-loop`, `[limits] doom_loop`, `Agent(doom_loop=...)`) and is
    recorded on the session with its other limits, so a resume or a worker counts as the run did; 1
    flags every call, 0 is no guard (guard_hooks leaves it out)."""

    def __init__(self, interactive: bool, threshold: int = DOOM_LOOP_THRESHOLD, source: str = "") -> None:
        if threshold < 1:
            raise ValueError("a doom-loop threshold is at least 1 (0 means no guard: leave it out)")
        self.interactive = interactive
        self.threshold = threshold
        self.source = source

    async def before_tool_call(self, session: Any, turn: Any, call: Any) -> ToolVerdict:
        before = _tool_uses_before(turn, call)
        previous = before[max(0, len(before) - (self.threshold - 1)):] if self.threshold > 1 else []
        this = (call.name, json.dumps(call.input, sort_keys=True))
        if len(previous) < self.threshold - 1 or any(p != this for p in previous):
            return None
        where = f" (threshold from {self.source})" if self.source not in ("", "the default") else ""
        reason = f"doom loop: {call.name} called {self.threshold} times in a row with the same input{where}"
        if self.interactive:
            return NeedApproval(reason)
        return Stop("doom_loop", reason)


def guard_hooks(
    reader: SpendReader | None, *, interactive: bool, budget_usd: float | None = None, daily_budget_usd: float | None = None,
    max_calls_per_hour: int | None = None, max_tool_calls: int | None = None, clock: Clock = SYSTEM_CLOCK,
    doom_loop: int = DOOM_LOOP_THRESHOLD, sources: dict[str, str] | None = None,
) -> list[Hook]:
    """The standard guards for a loop; the doom-loop guard is on unless its threshold is 0. `sources` says
    where each limit was set, for the reasons the guards stop with."""
    sources = sources or {}
    hooks: list[Hook] = [DoomLoopGuard(interactive=interactive, threshold=doom_loop, source=sources.get("doom_loop", ""))] if doom_loop else []
    if max_tool_calls is not None:
        hooks.append(ToolCallLimit(max_tool_calls, sources.get("max_tool_calls", "--max-tool-calls")))
    if budget_usd is not None or daily_budget_usd is not None or max_calls_per_hour is not None:
        if reader is None:
            raise ValueError("cost and rate limits need a SpendReader")
        hooks.append(CostGuard(reader, budget_usd, daily_budget_usd, max_calls_per_hour, clock=clock, sources=sources))
    return hooks
