"""Claude through the official SDK: one streamed Messages API call per `stream`, failures as data.

The SDK's own retries are off (`max_retries=0`): the loop's RetryPolicy retries, so every retry
is an event and a live status change. Raw stream events are assembled here (assembler.py)
rather than by the SDK's helper so that the recorded response is exactly what the API sent.
Cancellation closes the HTTP stream (`async with`) and lets CancelledError through, carrying
what had arrived (see base.attach_partial).

The stream is read through the SDK's own client (auth, headers, SSE decoding, its errors) but
as the plain JSON the API sent (`cast_to=object`), not the SDK's typed models: those know only
the block types of this SDK version and warn about, or reshape, anything newer. What is
recorded is then exactly the wire: `server_tool_use`, `web_search_tool_result`, citations,
every usage field, `stop_details`.

Extended thinking (`CHRONICLE_THINKING_TOKENS`, or the budget a session recorded with
`chronicle model --thinking N`, carried on the request) applies to the agent's own calls only; the
auxiliary calls (titles, compaction summaries) are small and never think.

Prompt caching: the system prompt, the last tool definition and the newest message carry
`cache_control`, so each call reads the previous call's prefix from the cache (three of the
four breakpoints the API allows). The markers are added to the wire copy only; nothing about
them is recorded, and the fingerprint covers the request without them.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from chronicle.domain.content import Message, ModelResponse, ProviderError, dump_blocks, sendable

from .anthropic_errors import provider_error
from .assembler import MessageAssembler, StreamIncomplete
from .base import DEFAULT_MAX_TOKENS, DeltaSink, IdleTimeout, ModelRequest, attach_partial, with_request_id
from .env_settings import base_url as checked_base_url
from .env_settings import http_timeout_s
from .env_settings import thinking_budget as checked_thinking
from .loop_client import LoopClient

CACHE = {"type": "ephemeral"}


class AnthropicProvider:
    name = "anthropic"
    #: Requests reach it with attachment references; the model caller puts the stored bytes in first.
    sends_attachment_bytes = True

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float | None = None,
        thinking_budget: int | None = None,
    ) -> None:
        """`api_key` and `base_url` default to the SDK's own ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL.

        Settings from the environment are checked here (env_settings.py): a bad one raises a
        ValueError naming it, before any request is made.
        """
        self.model = model
        self._api_key = api_key
        self.base_url = base_url if base_url is not None else checked_base_url(os.environ.get("ANTHROPIC_BASE_URL"))
        self.timeout_s = timeout_s if timeout_s is not None else http_timeout_s(os.environ.get("CHRONICLE_HTTP_TIMEOUT_S"))
        if thinking_budget is None:
            thinking_budget = checked_thinking(os.environ.get("CHRONICLE_THINKING_TOKENS"), DEFAULT_MAX_TOKENS)
        self.thinking_budget = thinking_budget
        self._clients = LoopClient(self._new_client)

    def __repr__(self) -> str:  # never show the key
        return f"AnthropicProvider(model={self.model!r}, base_url={self.base_url!r})"

    def _new_client(self) -> Any:
        """A client for the running loop (runtime/providers/loop_client.py closes it with the loop)."""
        from anthropic import AsyncAnthropic

        kwargs: dict[str, Any] = {"max_retries": 0, "timeout": self.timeout_s}
        if self._api_key is not None:
            kwargs["api_key"] = self._api_key
        if self.base_url is not None:
            kwargs["base_url"] = self.base_url
        return AsyncAnthropic(**kwargs)

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
        budget = self.thinking_budget if request.thinking_tokens is None else request.thinking_tokens
        if budget and request.auxiliary is None and budget < request.max_tokens:
            params["thinking"] = {"type": "enabled", "budget_tokens": budget}
        return params

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse:
        """The finished response, or on failure what had arrived: the answering model, the usage
        reported so far (message_start's input tokens) and the blocks already streamed."""
        from anthropic import AsyncStream

        assembler = MessageAssembler(request.model or self.model)
        request_id: str | None = None
        idle = IdleTimeout(self.timeout_s)
        try:
            async with idle:
                client = await self._clients.get()
                stream = await client.post(
                    "/v1/messages", body={**self.request_params(request), "stream": True}, cast_to=object,
                    stream=True, stream_cls=AsyncStream[object],
                )
                request_id = stream.response.headers.get("request-id")
                async with stream:
                    async for event in stream:
                        if isinstance(event, dict):
                            if event.get("type") != "ping":  # a ping says the connection lives, not that the answer moves
                                idle.progress()
                            for delta in assembler.feed(event):
                                await on_delta(delta)
            return with_request_id(assembler.response(), request_id)
        except asyncio.CancelledError as exc:
            attach_partial(exc, with_request_id(assembler.partial("aborted"), request_id))
            raise
        except StreamIncomplete as exc:
            failed = assembler.partial("error", ProviderError(kind="connection_error", message=str(exc), retryable=True))
            return with_request_id(failed, request_id)
        except Exception as exc:  # noqa: BLE001 - provider failures are data; CancelledError passes
            error = idle.error() if idle.expired() else provider_error(exc, secrets=(self._api_key,))
            failed = assembler.partial("error", error)
            return with_request_id(failed, request_id or getattr(exc, "request_id", None))



def wire_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Messages as the API wants them; the newest message's last block marks the cache point.

    Empty text blocks are left out (the API rejects them), and so is a message left with nothing.
    """
    wire: list[dict[str, Any]] = [
        {"role": m.role, "content": dump_blocks(blocks)} for m in messages if (blocks := sendable(m.content))
    ]
    if wire and wire[-1]["content"]:
        last = wire[-1]["content"][-1]
        if last.get("type") in ("text", "tool_result") and (last.get("text") != ""):
            wire[-1]["content"][-1] = {**last, "cache_control": CACHE}
    return wire
