"""Anthropic SDK exceptions turned into ProviderError data: what happened, may we retry, when.

Retryable: 408 (a timeout), 429, 500–504, 529, connection errors, timeouts, and an `overloaded_error`
or `api_error` that arrives as an SSE `error` event inside an HTTP 200 stream (the SDK raises
those with status 200). Not retryable: 400, 401, 403, 404, 413 and the rest — the turn fails
with the API's own message. A 400 saying the prompt is too long gets its own kind,
`prompt_too_long`, so the loop can compact and retry once where compaction exists.

Messages never carry the API key: the SDK's messages are built from response bodies, and
`redact` removes the key anyway in case a server echoes it back.
"""

from __future__ import annotations

import re
import time
from email.utils import parsedate_to_datetime
from typing import Any, Mapping

from chronicle.domain.content import ProviderError

RETRYABLE_STATUS = frozenset({408, 429, 500, 501, 502, 503, 504, 529})
#: Error types that mean "try again later" whatever the HTTP status says (SSE errors come as 200).
RETRYABLE_TYPES = frozenset({"overloaded_error", "api_error", "rate_limit_error", "timeout_error"})
#: The request does not fit the model's context window, in the wordings servers use:
#: "prompt is too long: 212000 tokens > 200000 maximum" and "input length and `max_tokens` exceed
#: context limit: 199759 + 8192 > 200000, decrease input length or `max_tokens` and try again"
#: (Anthropic); "This model's maximum context length is 8192 tokens. However, your messages resulted
#: in …" / code context_length_exceeded (OpenAI and vLLM); "Input length (160062 tokens) exceeds the
#: maximum allowed length" (SGLang). Not "max_tokens: 250000 > 64000, which is the maximum allowed
#: number of output tokens": no compaction makes that request fit.
PROMPT_TOO_LONG = re.compile(
    r"prompt is too long|exceeds? (the )?context (limit|window)|context.{0,20}(window|length).{0,40}exceed"
    r"|maximum context length is|context length is only|input length.{0,40}exceeds? the maximum|too many (input )?tokens",
    re.I,
)
#: "… exceed context limit: <input> + <max_tokens> > <limit>": when max_tokens alone fills the window,
#: shortening the input cannot help.
_INPUT_PLUS_OUTPUT = re.compile(r"(\d+)\s*\+\s*(\d+)\s*>\s*(\d+)")


def is_prompt_too_long(message: str) -> bool:
    """Whether a 400's message says the request does not fit the context window in a way that a
    shorter input (compacting older turns) can fix."""
    if not PROMPT_TOO_LONG.search(message):
        return False
    numbers = _INPUT_PLUS_OUTPUT.search(message)
    return numbers is None or int(numbers.group(2)) < int(numbers.group(3))


def redact(text: str, secrets: tuple[str | None, ...] = ()) -> str:
    """The given secrets and every secret the process holds or that looks like one (runtime/redaction.py)."""
    from chronicle.runtime.redaction import redact_secrets

    return redact_secrets(text, extra=secrets)


def retry_after_seconds(headers: Mapping[str, str] | None, now: float | None = None) -> float | None:
    """`retry-after-ms` (milliseconds) wins over `retry-after` (seconds or an HTTP date)."""
    if not headers:
        return None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms:
        try:
            return max(0.0, float(raw_ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (now if now is not None else time.time()))


def _body_error(body: Any) -> tuple[str | None, str | None]:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return error.get("type"), error.get("message")
    return None, None


def provider_error(exc: BaseException, secrets: tuple[str | None, ...] = ()) -> ProviderError:
    """Classify any exception raised while calling or streaming; never raises itself."""
    import anthropic

    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        error_type, api_message = _body_error(exc.body)
        error_type = error_type or getattr(exc, "type", None)
        api_message = api_message or getattr(exc, "api_message", None) or str(exc)
        headers = exc.response.headers if exc.response is not None else None
        in_stream = status == 200
        retryable = (error_type in RETRYABLE_TYPES) if in_stream else (status in RETRYABLE_STATUS)
        if not in_stream and error_type in RETRYABLE_TYPES and status >= 500:
            retryable = True
        kind = error_type or f"http_{status}"
        if status == 400 and is_prompt_too_long(api_message or ""):
            kind, retryable = "prompt_too_long", False
        where = "in the response stream" if in_stream else f"HTTP {status}"
        return ProviderError(
            kind=kind,
            message=redact(f"{api_message} ({where})", secrets),
            status=status,
            retryable=retryable,
            retry_after_s=retry_after_seconds(headers) if retryable and not in_stream else None,
        )
    if isinstance(exc, anthropic.APITimeoutError):
        return ProviderError(kind="timeout", message="the request to the model timed out", retryable=True)
    if isinstance(exc, anthropic.APIConnectionError):
        cause = exc.__cause__ or exc.__context__
        detail = f": {type(cause).__name__}" if cause is not None else ""
        if cause is not None and _is_bad_url(cause):
            # No retry can fix the address itself (`ANTHROPIC_BASE_URL=notaurl`): fail at once.
            return ProviderError(kind="bad_url", message=redact(f"the model API address is not usable{detail}: {cause}", secrets))
        return ProviderError(kind="connection_error", message=redact(f"cannot reach the model API{detail}", secrets), retryable=True)
    if _is_transport_error(exc):
        return ProviderError(
            kind="connection_error", message=redact(f"the connection broke while streaming: {type(exc).__name__}", secrets), retryable=True
        )
    if isinstance(exc, anthropic.APIResponseValidationError):
        return ProviderError(kind="bad_response", message=redact(f"the API answered something unexpected: {exc.message}", secrets))
    return ProviderError(kind="provider_error", message=redact(f"{type(exc).__name__}: {exc}", secrets))


def _is_bad_url(exc: BaseException) -> bool:
    for module in ("httpx2", "httpx"):
        try:
            lib = __import__(module)
        except ImportError:
            continue
        if isinstance(exc, (lib.UnsupportedProtocol, lib.InvalidURL)):
            return True
    return False


def _is_transport_error(exc: BaseException) -> bool:
    """Network errors the SDK does not wrap: they surface raw while a stream is being read."""
    for module in ("httpx2", "httpx"):
        try:
            lib = __import__(module)
        except ImportError:
            continue
        if isinstance(exc, (lib.TransportError, lib.StreamError)):
            return True
    return False
