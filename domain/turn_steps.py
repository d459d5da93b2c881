"""A Turn's steps as its state holds them: each model response, then the tool results that answer it.

The Turn records; this reads and shapes what it recorded. `StepsView` (which the Turn inherits)
answers questions about the steps (the open one, a call's result, the last response), and
`step_entry` builds the entry a ModelResponded adds: deterministic, as replay needs.

A result kept before its step closed (Turn.ToolResultsKept) is not repeated by the closing event
(Turn.ToolResultsRecorded), which stores a reference to it instead; readers of the closing event
(the history and audit projections) resolve references with these functions as the Turn does.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Sequence

from .errors import DomainError
from .ids import OPENS_NO_CALLS
from .stored_response import expand

if TYPE_CHECKING:  # the content models (pydantic) are imported where they are used: replaying a turn builds none
    from .content import ModelResponse, ToolResultBlock
    from .tool_call import ToolCall


def kept_ref(tool_use_id: str) -> dict[str, Any]:
    """What a step's closing event stores for a result the turn kept earlier (Turn.ToolResultsKept)."""
    return {"type": "tool_result", "tool_use_id": tool_use_id, "kept": True}


def is_kept_ref(block: dict[str, Any]) -> bool:
    return block.get("kept") is True and block.get("type") == "tool_result" and "content" not in block


def resolve_kept(blocks: list[dict[str, Any]], kept: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The closing event's blocks with each reference replaced by the result it refers to. A
    reference to nothing is refused: the model would otherwise read a result without content."""
    resolved = []
    for block in blocks:
        if is_kept_ref(block):
            if block["tool_use_id"] not in kept:
                raise DomainError(f"step results refer to a kept result for {block['tool_use_id']} that was never recorded")
            block = kept[block["tool_use_id"]]
        resolved.append(block)
    return resolved


def closing_blocks(who: str, step: dict[str, Any], results: Sequence[ToolResultBlock]) -> list[dict[str, Any]]:
    """What the event closing `step` stores: exactly one result per tool_use, in the model's order,
    a result kept earlier as a reference to it (`kept_ref`). `who` names the turn in the refusal."""
    wanted = [b["id"] for b in step["response"]["content"] if b.get("type") == "tool_use"]
    got = [r.tool_use_id for r in results]
    if got != wanted:
        raise DomainError(f"{who} step {step['step']}: results {got} do not answer tool uses {wanted}")
    kept = step.get("kept") or {}
    return [kept_ref(r.tool_use_id) if r.tool_use_id in kept else r.model_dump(mode="json") for r in results]


def step_entry(step: int, response: dict[str, Any], fingerprint: str, request_delta: dict[str, Any],
               at: datetime) -> dict[str, Any]:
    """The state a ModelResponded adds: a step whose tool calls wait for results (`results` None) if
    the response asks for tools and finished; an errored or aborted response's calls never run."""
    has_tools = any(b.get("type") == "tool_use" for b in response.get("content", []))
    finished = response.get("stop_reason") not in OPENS_NO_CALLS
    return {
        "step": step,
        "response": expand(response),
        "fingerprint": fingerprint,
        "message_count": request_delta.get("message_count", 0),
        "at": at.isoformat(),
        "results": None if (has_tools and finished) else [],
    }


class StepsView:
    """What a Turn's steps tell, read from its state (the Turn inherits it; it records nothing)."""

    steps: list[dict[str, Any]]

    @property
    def open_step(self) -> dict[str, Any] | None:
        """The last step if its tool calls still wait for results."""
        if self.steps and self.steps[-1]["results"] is None:
            return self.steps[-1]
        return None

    @property
    def last_response(self) -> ModelResponse | None:
        from .content import ModelResponse

        return ModelResponse.model_validate(self.steps[-1]["response"]) if self.steps else None

    @property
    def model_calls(self) -> int:
        return len(self.steps)

    def result_of(self, call: ToolCall) -> ToolResultBlock:
        """A call's result as the model read it: the block this turn holds for it, else the call's own
        (a call loaded from the store has no output of its own since ToolCall.Completed v3)."""
        from .content import ToolResultBlock

        block = self.result_for(call.step, call.tool_use_id)
        return ToolResultBlock.model_validate(block) if block is not None else call.result_block()

    def output_for(self, step: int, tool_use_id: str) -> str:
        """A completed call's output, which this turn stores ("" while it holds no result for it)."""
        return str((self.result_for(step, tool_use_id) or {}).get("content", ""))

    def result_for(self, step: int, tool_use_id: str) -> dict[str, Any] | None:
        """The tool_result block this turn holds for one tool use (recorded or kept), if any."""
        if step >= len(self.steps):
            return None
        entry = self.steps[step]
        results: list[dict[str, Any]] = entry["results"] or []
        for block in results:
            if block.get("type") == "tool_result" and block.get("tool_use_id") == tool_use_id:
                return block
        kept: dict[str, dict[str, Any]] = entry.get("kept") or {}
        return kept.get(tool_use_id)
