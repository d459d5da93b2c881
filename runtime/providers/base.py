"""The provider seam: a request in, deltas out to a callback, one finished response back.

Failures are data: a provider returns a response whose stop_reason is "error" (with a
ProviderError saying whether a retry could help) instead of raising into the loop.
Cancellation is the one exception: asyncio.CancelledError propagates so the stream closes.
"""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from chronicle.domain.content import Message, ModelResponse, ProviderError

DeltaSink = Callable[[dict[str, Any]], Awaitable[None]]
#: max_tokens of the agent's own model calls unless a caller says otherwise.
DEFAULT_MAX_TOKENS = 8192
_PARTIAL = "chronicle_partial_response"


def attach_partial(exc: BaseException, response: ModelResponse) -> None:
    """Hand what a cancelled stream had received to the caller on the CancelledError itself:
    cancellation must propagate, and a provider is shared by concurrent calls, so the
    exception is the one place that belongs to this call alone."""
    setattr(exc, _PARTIAL, response)


def partial_of(exc: BaseException) -> ModelResponse | None:
    value = getattr(exc, _PARTIAL, None)
    return value if isinstance(value, ModelResponse) else None


class ModelRequest(BaseModel):
    model_config = ConfigDict(frozen=True)
    model: str
    system: str = ""
    messages: list[Message] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    max_tokens: int = DEFAULT_MAX_TOKENS
    #: Which agent, session and call this is; the scripted provider answers by these.
    agent: str = "main"
    session_id: str = ""
    turn_number: int = 1
    call_index: int = 0
    auxiliary: Literal["title", "summary"] | None = None
    #: The session's recorded extended-thinking budget (Session.ModelChanged): 0 off; None the provider's default.
    thinking_tokens: int | None = None


class Provider(Protocol):
    name: str

    async def stream(self, request: ModelRequest, on_delta: DeltaSink) -> ModelResponse: ...


async def ignore_deltas(_: dict[str, Any]) -> None:
    return None


def with_request_id(response: ModelResponse, request_id: Any) -> ModelResponse:
    """The response with the provider's id of the request that produced it, when the server gave one."""
    return response.model_copy(update={"request_id": request_id}) if isinstance(request_id, str) and request_id else response


class IdleTimeout:
    """How long a streamed call may go without content: the HTTP client's timeout is per read, and
    a server that keeps a stalled stream alive (the Messages API's `ping` events, SSE comments)
    resets it forever. Wrap the request and the reading in `async with`; call `progress()` on every
    event that carries content. When `seconds` pass without one the body is cancelled and leaves
    with TimeoutError, and `expired()` says it was this bound (not the caller's cancellation, which
    passes through as CancelledError). It bounds silence, not the whole call: a long answer that
    keeps streaming is never cut."""

    def __init__(self, seconds: float, setting: str = "CHRONICLE_HTTP_TIMEOUT_S") -> None:
        self.seconds = seconds
        self.setting = setting
        self._scope: asyncio.Timeout | None = None

    async def __aenter__(self) -> "IdleTimeout":
        self._scope = asyncio.timeout(None)
        await self._scope.__aenter__()
        self.progress()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        assert self._scope is not None
        await self._scope.__aexit__(*exc_info)

    def progress(self) -> None:
        if self._scope is not None:
            self._scope.reschedule(asyncio.get_running_loop().time() + self.seconds)

    def expired(self) -> bool:
        return self._scope is not None and self._scope.expired()

    def error(self) -> ProviderError:
        return ProviderError(
            kind="timeout", retryable=True,
            message=f"no content from the model for {self.seconds:g} s (the stream stalled; {self.setting} sets this bound)",
        )
