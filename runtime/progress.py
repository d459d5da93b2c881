"""Progress of a turn, derived from what the Turn recorded: iterations, tokens, tools run, elapsed.

The live `progress` event after each model call and chat's `/progress` both read it from the
stored turn, so the two can never disagree and a resumed turn's progress counts what the dead
process did too.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Callable
from uuid import UUID

from chronicle.domain.ids import tool_call_ids

INPUT_USAGE = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
#: Tool calls that ended without running: steering, a guard or a hook skipped them, or a person denied them.
NOT_RUN = frozenset({"skipped", "denied"})
#: Sums over each running turn's steps before its last: the loop asks after every model call,
#: and summing every step each time made a long turn quadratic (0.4 ms a step at 200 steps).
#: Only the last step can still change (its tool results arrive after it is recorded); the
#: ones before it are final, so their sums are kept and extended (and their calls read once).
_SUMS: OrderedDict[UUID, tuple[int, int, int, int, int]] = OrderedDict()
_KEPT = 64

#: The status of a stored tool call, by id (`ChronicleStore.tool_call(id).status`).
StatusOf = Callable[[UUID], str]


def _figures(turn_id: UUID, step: dict[str, Any], status_of: StatusOf) -> tuple[int, int, int, int]:
    usage = step["response"].get("usage") or {}
    tokens_in = sum(int(usage.get(k) or 0) for k in INPUT_USAGE)
    ran = skipped = 0
    if step.get("results") is not None:
        for call_id in tool_call_ids(turn_id, [step]):
            status = status_of(call_id)
            ran += status not in NOT_RUN
            skipped += status == "skipped"
    return tokens_in, int(usage.get("output_tokens") or 0), ran, skipped


def _add(a: tuple[int, int, int, int], b: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    return a[0] + b[0], a[1] + b[1], a[2] + b[2], a[3] + b[3]


def _totals(turn_id: UUID, steps: list[dict[str, Any]], status_of: StatusOf) -> tuple[int, int, int, int]:
    final = len(steps) - 1  # the steps before the last cannot change any more
    counted, *kept = _SUMS.get(turn_id, (0, 0, 0, 0, 0))
    sums = (kept[0], kept[1], kept[2], kept[3])
    if counted > max(final, 0):  # an older version of the turn: count it afresh
        counted, sums = 0, (0, 0, 0, 0)
    for step in steps[counted:final]:
        sums = _add(sums, _figures(turn_id, step, status_of))
    if final > counted:
        _SUMS[turn_id] = (final, *sums)
        _SUMS.move_to_end(turn_id)
        if len(_SUMS) > _KEPT:
            _SUMS.popitem(last=False)
    if steps:
        sums = _add(sums, _figures(turn_id, steps[-1], status_of))
    return sums


def progress_of(turn: Any, max_iterations: int | None = None, *, status_of: StatusOf) -> dict[str, Any]:
    """`tools_run` counts the calls that ran (or began to: a cancelled one may have); `tools_skipped` the
    ones skipped instead (steering, a guard, a hook). Denied calls are in neither. A step's calls are
    counted once its results are recorded."""
    tokens_in, tokens_out, tools, skipped = _totals(turn.id, turn.steps, status_of)
    started = getattr(turn, "created_on", None)
    latest = getattr(turn, "modified_on", None)
    return {
        "turn_id": str(turn.id), "turn": turn.number, "status": turn.status, "iteration": turn.model_calls,
        "max_iterations": max_iterations, "input_tokens": tokens_in, "output_tokens": tokens_out, "tools_run": tools,
        "tools_skipped": skipped,
        "elapsed_s": round((latest - started).total_seconds(), 3) if started and latest else None,
    }
