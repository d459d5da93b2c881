"""Claude through the official SDK: one streamed Messages API call per `stream`, failures as data.

The SDK's own retries are off (`max_retries=0`): the loop's RetryPolicy retries, so every retry
is an event and a live status change. Raw stream events are assembled here (assembler.py)
rather than by the SDK's helper so that the recorded response is exactly what the API sent.
Cancellation closes the HTTP stream (`async with`) and lets CancelledError through.

Prompt caching: the system prompt, the last tool definition and the newest message carry
`cache_control`, so each call reads the previous call's prefix from the cache (three of the
four breakpoints the API allows). The markers are added to the wire copy only; nothing about
them is recorded, and the fingerprint covers the request without them.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from chronicle.domain.content import Message, ModelResponse, ProviderError

from .anthropic_errors import provider_error
from .assembler import MessageAssembler, StreamIncomplete
from .base import DeltaSink, ModelRequest

CACHE = {"type": "ephemeral"}
DEFAULT_TIMEOUT_S = 600.0


class AnthropicProvider:
    name = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float | None = None,
        thinking_budget: int | None = None,
    ) -> None:
        """`api_key` and `base_url` default to the SDK's own ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL."""
        self.model = model
        self._api_key = api_key
        self.base_url = base_url
        self.timeout_s = timeout_s if timeout_s is not None else float(os.environ.get("CHRONICLE_HTTP_TIMEOUT_S") or DEFAULT_TIMEOUT_S)
        budget = thinking_budget if thinking_budget is not None else os.environ.get("CHRONICLE_THINKING_TOKENS")
        self.thinking_budget = int(budget) if budget else None
        self._clients: dict[int, Any] = {}

    def __repr__(self) -> str:  # never show the key
        return f"AnthropicProvider(model={self.model!r}, base_url={self.base_url!r})"

    def _client(self) -> Any:
        """One client per event loop: an HTTP pool cannot outlive the loop it was made in."""
        from anthropic import AsyncAnthropic

        loop_id = id(asyncio.get_running_loop())
        client = self._clients.get(loop_id)
        if client is None:
            kwargs: dict[str, Any] = {"max_retries": 0, "timeout": self.timeout_s}
            if self._api_key is not None:
                kwargs["api_key"] = self._api_key
            if self.base_url is not None:
                kwargs["base_url"] = self.base_url
            client = AsyncAnthropic(**kwargs)
            self._clients = {loop_id: client}
        return client

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        """The Messages API body for a request, with cache breakpoints on the wire copy."""
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "max_tokens": request.max_tokens,
            "messages": wire_messages(request.messages),
        }
        if request.system:
            params["system"] = [{"type": "text", "text": request.system, "cache_control": CACHE}]
        if request.tools:
            tools = [dict(t) for t in request.tools]
            tools[-1] = {**tools[-1], "cache_control": CACHE}
            params["tools"] = tools
        if self.thinking_budget:
            params["thinking"] = {"type": "enabled", "budget_tokens": self.thinking_budget}
            params["max_tokens"] = max(request.max_tokens, self.thinking_budget + 1024)
        return params

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse:
        model = request.model or self.model
        assembler = MessageAssembler(model)
        try:
            client = self._client()
            stream = await client.messages.create(**self.request_params(request), stream=True)
            async with stream:
                async for event in stream:
                    for delta in assembler.feed(event.to_dict(mode="json")):
                        await on_delta(delta)
            return assembler.response()
        except StreamIncomplete as exc:
            return self._failed(model, ProviderError(kind="connection_error", message=str(exc), retryable=True))
        except Exception as exc:  # noqa: BLE001 - provider failures are data; CancelledError passes
            return self._failed(model, provider_error(exc, secrets=(self._api_key,)))

    @staticmethod
    def _failed(model: str, error: ProviderError) -> ModelResponse:
        return ModelResponse(stop_reason="error", error=error, model=model)


def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as the API wants them; the newest message's last block marks the cache point."""
    wire = [m.wire() for m in messages]
    if wire and wire[-1]["content"]:
        last = wire[-1]["content"][-1]
        if last.get("type") in ("text", "tool_result") and (last.get("text") != ""):
            wire[-1]["content"][-1] = {**last, "cache_control": CACHE}
    return wire
