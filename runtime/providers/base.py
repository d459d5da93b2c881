"""The provider seam: a request in, deltas out to a callback, one finished response back.

Failures are data: a provider returns a response whose stop_reason is "error" (with a
ProviderError saying whether a retry could help) instead of raising into the loop.
Cancellation is the one exception: asyncio.CancelledError propagates so the stream closes.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from chronicle.domain.content import Message, ModelResponse

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
