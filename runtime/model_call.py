"""One model call: build the request from recorded events, stream it, retry what may be retried.

Only the fingerprint and a small delta description are recorded with each response; the
messages themselves are already in the log (inputs, responses, tool results), so a long
session never stores its whole request again on every step.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from datetime import timedelta
from time import monotonic
from typing import Any

from chronicle.domain.content import Message, ModelResponse, TextBlock
from chronicle.domain.context import merge_roles, turn_messages
from chronicle.domain.turn import Turn

from .live import MessageEnd, MessageStart, MessageUpdate, StatusChange
from .providers.base import ModelRequest


def _sha(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()).hexdigest()


def fingerprint(request: ModelRequest) -> str:
    """Hash of what decides the model's answer: model, system prompt, tool schemas, messages."""
    return _sha(
        {
            "model": request.model,
            "system": request.system,
            "tools": request.tools,
            "messages": [m.wire() for m in request.messages],
        }
    )


def request_delta(request: ModelRequest, previous_count: int) -> dict[str, Any]:
    """What this call adds to the previous one, by reference: every message is already an event.

    The request is rebuilt as the first `message_count` messages of the session's context
    (inputs, recorded responses, tool results), so a count and hashes suffice; the system
    prompt is on the session's AgentSpec and the hashes show whether it or the tools changed.
    """
    return {
        "model": request.model,
        "max_tokens": request.max_tokens,
        "system_sha256": _sha(request.system),
        "tools_sha256": _sha(request.tools),
        "message_count": len(request.messages),
        "new_messages": max(0, len(request.messages) - previous_count),
    }


def build_messages(prior: list[Message], turn: Turn) -> list[Message]:
    """The request's messages built from scratch: the specification that RequestContext's
    incremental build is tested against (the loop itself uses RequestContext)."""
    return merge_roles([*prior, *turn_messages(turn)])


class ModelCaller:
    """Streams one response, forwarding deltas to live subscribers and retrying by policy."""

    def __init__(self, loop: Any) -> None:
        self.loop = loop
        self.partial_text: list[str] = []

    async def call(self, turn: Turn, request: ModelRequest) -> tuple[ModelResponse, int, float]:
        loop = self.loop
        sid = str(turn.session_id)
        step = turn.model_calls
        attempt = 1
        started = monotonic()
        while True:
            self.partial_text = []
            await loop.emit(MessageStart(session_id=sid, turn_id=str(turn.id), step=step, model=request.model))

            async def on_delta(delta: dict[str, Any]) -> None:
                if delta.get("type") == "text":
                    self.partial_text.append(delta.get("text", ""))
                await loop.emit(MessageUpdate(session_id=sid, turn_id=str(turn.id), step=step, delta=delta))

            response = await loop.provider.stream(request, on_delta)
            error = response.error
            if response.stop_reason == "error" and error and error.retryable and attempt < loop.options.retry.max_attempts:
                delay = loop.options.retry.delay(attempt, error.retry_after_s)
                now = loop.clock.now()
                turn.record_retry(
                    attempt=attempt, reason=f"{error.kind}: {error.message}", delay_s=delay, now=now,
                    error=error.model_dump(mode="json", include={"kind", "message", "status", "retry_after_s"}),
                )
                loop.store.save(turn)
                self.partial_text = []  # a cancel during the wait records nothing of the failed attempt
                await loop.emit(
                    StatusChange(
                        session_id=sid, status="retry", attempt=attempt + 1,
                        next_attempt_at=(now + timedelta(seconds=delay)).isoformat(), reason=error.message,
                    )
                )
                await asyncio.sleep(delay)
                await loop.emit(StatusChange(session_id=sid, status="busy", attempt=attempt + 1))
                attempt += 1
                continue
            await loop.emit(
                MessageEnd(
                    session_id=sid, turn_id=str(turn.id), step=step, stop_reason=response.stop_reason,
                    content=[b.model_dump(mode="json") for b in response.content],
                )
            )
            return response, attempt, (monotonic() - started) * 1000

    def aborted_response(self, model: str) -> ModelResponse:
        text = "".join(self.partial_text)
        return ModelResponse(content=[TextBlock(text=text)] if text else [], stop_reason="aborted", model=model)
