"""Any chat-completions server (llama.cpp, vLLM, Ollama, hosted APIs) through the official `openai` SDK.

Same contract as the Anthropic provider: one streamed call per `stream`, failures returned as
data with `retryable` set by the same rules (408/429/5xx, connection errors, timeouts, an error
sent inside a 200 stream that says "try later"), the SDK's own retries off so the loop's
RetryPolicy retries and every retry is an event. The conversion to and from the wire is in
openai_chat.py; the recorded response keeps the provider's own message under `raw`.

Configured by the SDK's own variables: OPENAI_BASE_URL (default the OpenAI API) and
OPENAI_API_KEY (a local server without auth takes any value; "none" is sent when unset).
"""

from __future__ import annotations

import os
from typing import Any

from chronicle.domain.content import ModelResponse, ProviderError

from .anthropic_errors import RETRYABLE_STATUS, _is_transport_error, is_prompt_too_long, redact, retry_after_seconds
from .base import DeltaSink, IdleTimeout, ModelRequest, with_request_id
from .loop_client import LoopClient
from .openai_chat import ChunkAssembler, ChunkStreamIncomplete, wire_messages, wire_tools

DEFAULT_TIMEOUT_S = 600.0
#: Error types or codes inside a 200 stream that mean "try again later".
RETRYABLE_STREAM_ERRORS = frozenset(
    {"server_error", "overloaded_error", "api_error", "rate_limit_error", "rate_limit_exceeded", "timeout"}
)


class OpenAICompatProvider:
    name = "openai-compatible"
    #: Stored images (an input's attachments, an MCP tool's pictures) are sent as data: URLs (openai_chat.py).
    sends_attachment_bytes = True

    def __init__(
        self, model: str, *, api_key: str | None = None, base_url: str | None = None, timeout_s: float | None = None
    ) -> None:
        self.model = model
        self._api_key = api_key
        self.base_url = base_url
        self.timeout_s = (
            timeout_s if timeout_s is not None else float(os.environ.get("CHRONICLE_HTTP_TIMEOUT_S") or DEFAULT_TIMEOUT_S)
        )
        self._clients = LoopClient(self._new_client)

    def __repr__(self) -> str:  # never show the key
        return f"OpenAICompatProvider(model={self.model!r}, base_url={self.base_url!r})"

    def _new_client(self) -> Any:
        """A client for the running loop (runtime/providers/loop_client.py closes it with the loop)."""
        from openai import AsyncOpenAI

        key = self._api_key or os.environ.get("OPENAI_API_KEY") or "none"
        kwargs: dict[str, Any] = {"max_retries": 0, "timeout": self.timeout_s, "api_key": key}
        if self.base_url is not None:
            kwargs["base_url"] = self.base_url
        return AsyncOpenAI(**kwargs)

    def request_params(self, request: ModelRequest) -> dict[str, Any]:
        params: dict[str, Any] = {
            "model": request.model or self.model,
            "messages": wire_messages(request.system, request.messages),
            "max_tokens": request.max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            params["tools"] = wire_tools(request.tools)
        return params

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse:
        model = request.model or self.model
        assembler = ChunkAssembler(model)
        request_id: str | None = None
        idle = IdleTimeout(self.timeout_s)
        try:
            async with idle:
                stream = await (await self._clients.get()).chat.completions.create(**self.request_params(request))
                request_id = stream.response.headers.get("x-request-id")
                async with stream:
                    async for chunk in stream:
                        idle.progress()  # keep-alive comments never become chunks
                        for delta in assembler.feed(chunk.to_dict(mode="json")):
                            await on_delta(delta)
            return with_request_id(assembler.response(), request_id)
        except ChunkStreamIncomplete as exc:
            failed = self._failed(model, ProviderError(kind="connection_error", message=str(exc), retryable=True))
            return with_request_id(failed, request_id)
        except Exception as exc:  # noqa: BLE001 - provider failures are data; CancelledError passes
            error = idle.error() if idle.expired() else openai_error(exc, secrets=(self._api_key, os.environ.get("OPENAI_API_KEY")))
            failed = self._failed(model, error)
            return with_request_id(failed, request_id or getattr(exc, "request_id", None))

    @staticmethod
    def _failed(model: str, error: ProviderError) -> ModelResponse:
        return ModelResponse(stop_reason="error", error=error, model=model)


def _error_fields(body: Any) -> tuple[str | None, str | None]:
    """(type or code, message) from an error body in either of the shapes servers send."""
    if isinstance(body, dict):
        inner: dict[str, Any] = body["error"] if isinstance(body.get("error"), dict) else body
        kind = inner.get("type") or inner.get("code")
        return (str(kind) if kind else None), inner.get("message")
    return None, None


def openai_error(exc: BaseException, secrets: tuple[str | None, ...] = ()) -> ProviderError:
    """Classify any exception raised while calling or streaming; never raises itself."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        kind, message = _error_fields(exc.body)
        message = message or exc.message or str(exc)
        retryable = status in RETRYABLE_STATUS
        if status == 400 and (is_prompt_too_long(message) or kind == "context_length_exceeded"):
            kind, retryable = "prompt_too_long", False
        return ProviderError(
            kind=kind or f"http_{status}",
            message=redact(f"{message} (HTTP {status})", secrets),
            status=status,
            retryable=retryable,
            retry_after_s=retry_after_seconds(exc.response.headers) if retryable else None,
        )
    if isinstance(exc, openai.APITimeoutError):
        return ProviderError(kind="timeout", message="the request to the model timed out", retryable=True)
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {type(cause).__name__}" if cause is not None else ""
        return ProviderError(
            kind="connection_error", message=redact(f"cannot reach the model API{detail}", secrets), retryable=True
        )
    if isinstance(exc, openai.APIError):
        # An `error` object inside a 200 stream: the SDK raises it without a status.
        kind, message = _error_fields(exc.body)
        message = message or exc.message
        return ProviderError(
            kind=kind or "stream_error",
            message=redact(f"{message} (in the response stream)", secrets),
            status=200,
            retryable=(kind in RETRYABLE_STREAM_ERRORS) if kind else True,
        )
    if _is_transport_error(exc):
        return ProviderError(
            kind="connection_error",
            message=redact(f"the connection broke while streaming: {type(exc).__name__}", secrets),
            retryable=True,
        )
    return ProviderError(kind="provider_error", message=redact(f"{type(exc).__name__}: {exc}", secrets))
