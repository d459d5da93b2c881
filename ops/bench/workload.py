"""The one workload both systems run: an instant model that asks for one tool per step.

Step k (k < N) answers with a short text and one `lookup` tool call; step N answers with
a final text. The tool returns the same fixed ~400-character text instantly, so what is
measured is the runtime around the model and the tool: context building, recording, commits.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from chronicle.domain.content import ModelResponse, TextBlock, ToolUseBlock, Usage
from chronicle.runtime.providers.base import DeltaSink, ModelRequest
from chronicle.runtime.tools.base import Tool, Toolbox, ToolContext, ToolOutput

TOOL_TEXT = ("The record you asked for holds the usual fields: name, owner, created, updated, tags. " * 5).strip()
THOUGHT = "Let me look that up."
FINAL = "Done: every record has been read."
PROMPT = "Read the records one by one and tell me when you are done."


def tool_input(k: int) -> dict[str, Any]:
    return {"key": f"record-{k}"}


class LookupInput(BaseModel):
    key: str


class Lookup(Tool):
    """A trivial read-only tool: no file system, no network, the same answer every time."""

    name = "lookup"
    description = "Look a record up by key."
    Input = LookupInput
    read_only = True
    idempotent = True
    parallel_safe = True

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        return ToolOutput(content=TOOL_TEXT)


def toolbox() -> Toolbox:
    return Toolbox([Lookup()])


class InstantProvider:
    """Chronicle's Provider protocol, answering at once: tool_use until step N, then end_turn."""

    name = "bench:instant"

    def __init__(self, steps: int) -> None:
        self.steps = steps

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse:
        k = request.call_index
        usage = Usage(input_tokens=10, output_tokens=5)
        if k < self.steps:
            return ModelResponse(
                content=[TextBlock(text=THOUGHT), ToolUseBlock(id=f"toolu_{k:06d}", name="lookup", input=tool_input(k))],
                stop_reason="tool_use", usage=usage, model=request.model,
            )
        return ModelResponse(content=[TextBlock(text=FINAL)], stop_reason="end_turn", usage=usage, model=request.model)
