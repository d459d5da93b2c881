"""Progress of a turn, derived from what the Turn recorded: iterations, tokens, tools run, elapsed.

The live `progress` event after each model call and chat's `/progress` both read it from the
stored turn, so the two can never disagree and a resumed turn's progress counts what the dead
process did too.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any
from uuid import UUID

INPUT_USAGE = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
#: Sums over each running turn's steps before its last: the loop asks after every model call,
#: and summing every step each time made a long turn quadratic (0.4 ms a step at 200 steps).
#: Only the last step can still change (its tool results arrive after it is recorded); the
#: ones before it are final, so their sums are kept and extended.
_SUMS: OrderedDict[UUID, tuple[int, int, int, int]] = OrderedDict()
_KEPT = 64


def _figures(step: dict[str, Any]) -> tuple[int, int, int]:
    usage = step["response"].get("usage") or {}
    tokens_in = sum(int(usage.get(k) or 0) for k in INPUT_USAGE)
    tools = 0
    if step.get("results") is not None:
        tools = sum(1 for b in step["response"].get("content", []) if b.get("type") == "tool_use")
    return tokens_in, int(usage.get("output_tokens") or 0), tools


def _totals(turn_id: UUID, steps: list[dict[str, Any]]) -> tuple[int, int, int]:
    final = len(steps) - 1  # the steps before the last cannot change any more
    counted, tokens_in, tokens_out, tools = _SUMS.get(turn_id, (0, 0, 0, 0))
    if counted > max(final, 0):  # an older version of the turn: count it afresh
        counted, tokens_in, tokens_out, tools = 0, 0, 0, 0
    for step in steps[counted:final]:
        i, o, t = _figures(step)
        tokens_in, tokens_out, tools = tokens_in + i, tokens_out + o, tools + t
    if final > counted:
        _SUMS[turn_id] = (final, tokens_in, tokens_out, tools)
        _SUMS.move_to_end(turn_id)
        if len(_SUMS) > _KEPT:
            _SUMS.popitem(last=False)
    if steps:
        i, o, t = _figures(steps[-1])
        tokens_in, tokens_out, tools = tokens_in + i, tokens_out + o, tools + t
    return tokens_in, tokens_out, tools


def progress_of(turn: Any, max_iterations: int | None = None) -> dict[str, Any]:
    tokens_in, tokens_out, tools = _totals(turn.id, turn.steps)
    started = getattr(turn, "created_on", None)
    latest = getattr(turn, "modified_on", None)
    return {
        "turn_id": str(turn.id), "turn": turn.number, "status": turn.status, "iteration": turn.model_calls,
        "max_iterations": max_iterations, "input_tokens": tokens_in, "output_tokens": tokens_out, "tools_run": tools,
        "elapsed_s": round((latest - started).total_seconds(), 3) if started and latest else None,
    }
