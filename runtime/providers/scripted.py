"""A provider that answers from a JSON script: for tests, demos, and offline replays.

The k-th response of an agent answers that agent's k-th model call in the current turn of a
session; k comes from the event log (the request's call_index), so a resumed process picks up
where a dead one stopped. An agent's list may instead be a list of lists, one per turn.
Auxiliary calls (titles, summaries) never consume the agent's responses.
"""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from chronicle.domain.content import ContentBlock, ModelResponse, ProviderError, StopReason, TextBlock, ThinkingBlock, ToolUseBlock, Usage

from .base import DeltaSink, ModelRequest


class ScriptError(ValueError):
    """The script file cannot be used; the message names the file and what is wrong."""


class ScriptedResponse(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: list[ContentBlock] = Field(default_factory=list)
    stop_reason: StopReason = "end_turn"  # a typo fails the whole script at load, not the session at run time
    stop_details: dict[str, Any] | None = None
    usage: Usage = Field(default_factory=Usage)
    delay_s: float = 0.0
    #: Hold the response until this file exists (a path relative to the script's folder, or absolute):
    #: a test or a demo decides when the model answers, where a fixed delay_s races a loaded machine.
    until_file: str | None = None
    #: Created (empty) when the call begins, before `delay_s` and `until_file`: a test learns that the process has
    #: read what it needed and is inside the model call, the moment to kill it or to change the session under it.
    started_file: str | None = None
    error: ProviderError | None = None


#: Seconds a response waits for its `until_file` before the call fails, and between looks.
UNTIL_FILE_MAX_S = 120.0
UNTIL_FILE_POLL_S = 0.05


class Script(BaseModel):
    model_config = ConfigDict(extra="forbid")
    agents: dict[str, list[ScriptedResponse] | list[list[ScriptedResponse]]]
    title: list[str | ScriptedResponse] = Field(default_factory=list)
    summary: list[str | ScriptedResponse] = Field(default_factory=list)


class ScriptedProvider:
    def __init__(self, path: Path | str, model: str = "scripted") -> None:
        self.path = Path(path)
        self.name = f"scripted:{self.path}"
        self.model = model
        self.script = load_script(self.path)

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse:
        try:
            scripted = self._pick(request)
        except ScriptError as exc:
            return ModelResponse(
                stop_reason="error", model=request.model,
                error=ProviderError(kind="script_exhausted", message=str(exc), retryable=False),
            )
        if scripted is None:
            return ModelResponse(content=[TextBlock(text=self._stand_in(request))], stop_reason="end_turn", model=request.model)
        if scripted.started_file is not None:
            (self.path.parent / scripted.started_file).touch()  # an absolute name stays itself
        if scripted.delay_s:
            await asyncio.sleep(scripted.delay_s)
        if scripted.until_file is not None and not await self._gate_opened(scripted.until_file):
            return ModelResponse(stop_reason="error", model=request.model, error=ProviderError(
                kind="script_gate", retryable=False,
                message=f"{self.path}: until_file {scripted.until_file} did not appear within {UNTIL_FILE_MAX_S:.0f} s"))
        if scripted.error is not None:
            return ModelResponse(stop_reason="error", error=scripted.error, model=request.model)
        for index, block in enumerate(scripted.content):
            await on_delta({"type": "block_start", "index": index, "block": block.model_dump(mode="json")})
            if isinstance(block, TextBlock):
                await on_delta({"type": "text", "index": index, "text": block.text})
            elif isinstance(block, ThinkingBlock):
                await on_delta({"type": "thinking", "index": index, "thinking": block.thinking})
            elif isinstance(block, ToolUseBlock):
                await on_delta({"type": "input_json", "index": index, "partial_json": json.dumps(block.input)})
        return ModelResponse(
            content=scripted.content,
            stop_reason=scripted.stop_reason,
            stop_details=scripted.stop_details,
            usage=scripted.usage,
            model=request.model,
        )

    async def _gate_opened(self, name: str) -> bool:
        gate = self.path.parent / name  # an absolute name stays itself
        deadline = time.monotonic() + UNTIL_FILE_MAX_S
        while not gate.exists():
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(UNTIL_FILE_POLL_S)
        return True

    def _pick(self, request: ModelRequest) -> ScriptedResponse | None:
        if request.auxiliary is not None:
            pool = self.script.title if request.auxiliary == "title" else self.script.summary
            index = 0 if request.auxiliary == "title" else request.call_index
            if index >= len(pool):
                return None
            item = pool[index]
            return ScriptedResponse(content=[TextBlock(text=item)]) if isinstance(item, str) else item
        responses = self.script.agents.get(request.agent)
        if responses is None:
            raise ScriptError(f"{self.path}: no responses for agent {request.agent!r} (agents: {', '.join(self.script.agents)})")
        if responses and isinstance(responses[0], list):
            turn_index = request.turn_number - 1
            if turn_index >= len(responses):
                raise ScriptError(
                    f"{self.path}: agent {request.agent!r} has responses for {len(responses)} turn(s); turn {request.turn_number} has none"
                )
            responses = responses[turn_index]
        if request.call_index >= len(responses):
            raise ScriptError(
                f"{self.path}: agent {request.agent!r} ran out of responses: model call {request.call_index + 1} "
                f"of turn {request.turn_number}, but the script has {len(responses)}"
            )
        return responses[request.call_index]  # type: ignore[return-value]

    @staticmethod
    def _stand_in(request: ModelRequest) -> str:
        first = next((b.text for m in request.messages for b in m.content if isinstance(b, TextBlock)), "")
        if request.auxiliary == "title":
            words = first.split()
            return " ".join(words[:6]) + ("…" if len(words) > 6 else "") or "Untitled session"
        return f"Summary of {len(request.messages)} earlier message(s)."


def load_script(path: Path) -> Script:
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScriptError(f"script file not found: {path}") from None
    except json.JSONDecodeError as exc:
        raise ScriptError(f"{path} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise ScriptError(f'{path}: a script is an object, {{"agents": {{"AGENT": [responses]}}}} '
                          f"(the main agent is \"main\"), not a {type(raw).__name__}")
    try:
        return Script.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"] if "[" not in str(p))  # drop union-branch labels
        raise ScriptError(f"{path}: {where}: {first['msg']}") from None
