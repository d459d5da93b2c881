"""Progress of a turn, derived from what the Turn recorded: iterations, tokens, tools run, elapsed.

The live `progress` event after each model call and chat's `/progress` both read it from the
stored turn, so the two can never disagree and a resumed turn's progress counts what the dead
process did too.
"""

from __future__ import annotations

from typing import Any


def progress_of(turn: Any, max_iterations: int | None = None) -> dict[str, Any]:
    tokens_in = tokens_out = tools = 0
    for step in turn.steps:
        usage = step["response"].get("usage") or {}
        tokens_in += sum(int(usage.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"))
        tokens_out += int(usage.get("output_tokens") or 0)
        if step.get("results") is not None:
            tools += sum(1 for b in step["response"].get("content", []) if b.get("type") == "tool_use")
    started = getattr(turn, "created_on", None)
    latest = getattr(turn, "modified_on", None)
    return {
        "turn_id": str(turn.id), "turn": turn.number, "status": turn.status, "iteration": turn.model_calls,
        "max_iterations": max_iterations, "input_tokens": tokens_in, "output_tokens": tokens_out, "tools_run": tools,
        "elapsed_s": round((latest - started).total_seconds(), 3) if started and latest else None,
    }
