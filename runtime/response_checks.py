"""Responses the log cannot hold as a normal step become recorded failures, never a loop.

A tool call's aggregate id is derived from its `tool_use` id (so a re-run after a crash
collides instead of duplicating). A response that uses one id twice would make two calls
claim one aggregate: the save fails, looks like another process advancing the session, and
the turn stays `running` while every resume pays for the same call again. Checking before
recording turns it into a failed turn with the response's usage priced like any other.
"""

from __future__ import annotations

from collections import Counter

from chronicle.domain.content import ModelResponse, ProviderError


def unrecordable(response: ModelResponse) -> str | None:
    """Why this response cannot be recorded as a step, or None."""
    counts = Counter(block.id for block in response.tool_uses)
    if "" in counts:
        return "the model returned a tool_use block without an id"
    repeated = sorted(i for i, n in counts.items() if n > 1)
    if repeated:
        names = ", ".join(f"{i!r} ×{counts[i]}" for i in repeated)
        return f"the model returned the same tool_use id more than once ({names}); ids must be unique"
    return None


def as_failure(response: ModelResponse, problem: str) -> ModelResponse:
    """The response as a failed call: content, usage and model kept as the model sent them (it was
    paid for, and the record shows what was wrong). Its stop reason `error` opens no tool call
    (domain/turn_steps.py) and is never sent back (domain/context_wire.py sends finished responses only)."""
    detail = f"{problem}; the response was recorded as a failure and none of its {len(response.tool_uses)} tool call(s) ran"
    update: dict[str, object] = {"stop_reason": "error", "error": ProviderError(kind="invalid_response", message=detail)}
    if response.raw is None:  # the stop reason the API sent is kept where every other one of its own is
        update["raw"] = {"stop_reason": response.stop_reason}
    return response.model_copy(update=update)
