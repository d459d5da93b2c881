"""One model call: build the request from recorded events, stream it, retry what may be retried.

Only the fingerprint and a small delta description are recorded with each response; the
messages themselves are already in the log (inputs, responses, tool results), so a long
session never stores its whole request again on every step.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
from datetime import timedelta
from time import monotonic
from typing import Any

from chronicle.domain.content import Message, ModelResponse, TextBlock, ToolUseBlock, cut_block_ref
from chronicle.domain.context import merge_roles, turn_messages
from chronicle.domain.turn import Turn

from .attachments import with_attachment_data
from .live import MessageEnd, MessageStart, MessageUpdate, StatusChange
from .loop_io import LoopIO
from .pricing import prefetch as prefetch_prices
from .providers.base import ModelRequest, partial_of
from .tool_runner import CUT_AT_MAX_TOKENS


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


def request_delta(request: ModelRequest) -> dict[str, Any]:
    """What a recorded response keeps of its request, by reference: every message is already an event.

    The request is rebuilt as the first `message_count` messages of the session's context
    (inputs, recorded responses, tool results); the system prompt is on the session's AgentSpec,
    and the response's fingerprint shows whether it or the tools changed. Nothing else is stored,
    because nothing else is read (see Turn.ModelResponded v3).
    """
    delta = {"model": request.model, "max_tokens": request.max_tokens, "message_count": len(request.messages)}
    if request.thinking_tokens is not None:  # chosen on the session (Session.ModelChanged); absent: the process default
        delta["thinking_tokens"] = request.thinking_tokens
    return delta


#: A response that stopped like this never has its tool calls run.
NOT_RUN_STOP_REASONS = frozenset({"max_tokens", "refusal"})


def runs_no_tools(response: ModelResponse) -> bool:
    return response.stop_reason in NOT_RUN_STOP_REASONS or bool(response.cut_tool_uses)


#: The API's stop reason when the answer filled the model's context window (recorded as max_tokens for the loop).
CONTEXT_WINDOW_FULL = "model_context_window_exceeded"


def cut_at(response: ModelResponse) -> str:
    """The limit that cut a response short, as the user is told it: max_tokens, or the context window."""
    if response.provider_stop_reason == CONTEXT_WINDOW_FULL:
        return f"the context window's limit ({CONTEXT_WINDOW_FULL})"
    return "max_tokens"


def input_not_object(response: ModelResponse) -> bool:
    """A tool input that is not a JSON object although the response was not cut (stop reason
    tool_use or end_turn): the model (or the server) wrote JSON that does not parse, or parses to a
    list, a string, a number. Kept raw like a cut input, but it is not a max_tokens matter."""
    return response.stop_reason != "max_tokens" and bool(response.cut_tool_uses)


def not_run_reason(response: ModelResponse, block: ToolUseBlock) -> str | None:
    """Why a tool call of this response is recorded as failed without running, or None to run it."""
    if block.cut and input_not_object(response):
        return (
            f"this call's input is not a JSON object (the model wrote {len(block.partial_input_json or '')} characters "
            "that do not parse to one), so it was not run; the text is kept on the recorded response, never repaired by guessing"
        )
    if block.cut:
        return (
            f"the response was cut at {cut_at(response)} inside this call's input, so it was not run; the partial input "
            f"({len(block.partial_input_json or '')} characters) is kept on the recorded response, never completed by guessing"
        )
    if input_not_object(response):
        return "not run: another call of this response has an input that is not a JSON object, so the response is not sent back"
    if response.stop_reason == "max_tokens" or response.cut_tool_uses:
        return CUT_AT_MAX_TOKENS.replace("max_tokens", cut_at(response), 1)
    if response.stop_reason == "refusal":
        return "not run: the model refused this request"
    return None


def unfinished_outcome(response: ModelResponse) -> tuple[str, dict[str, Any]] | None:
    """A recorded response that ends the turn as failed although the call itself worked.

    A refusal: the turn is left out of every later request (domain/context.py), as the API
    documentation asks. A tool input cut by max_tokens (or the context window), or one that is
    not a JSON object although nothing cut it: the call cannot be run or sent back without
    inventing input, so the turn stops and says which of the two happened.
    """
    if response.stop_reason == "refusal":
        details = response.stop_details or {}
        said = "; ".join(f"{k}: {v}" for k, v in details.items() if k != "type" and v)
        reason = (
            f"the model refused this request{f' ({said})' if said else ''}; the refused exchange is recorded "
            "and left out of later context"
        )
        return reason, {"kind": "refusal", "stop_details": response.stop_details}
    cut = [cut_block_ref(b) for b in response.cut_tool_uses]
    if cut and input_not_object(response):
        names = ", ".join(dict.fromkeys(name for _, name in cut))
        reason = (
            f"the model wrote an input for {names} that is not a JSON object (stop reason {response.provider_stop_reason!r}, "
            "not a cut); the call was not run and nothing was repaired: the raw text is on the recorded response. "
            "Ask again; if it repeats, the model or the server sends malformed tool input"
        )
        return reason, {"kind": "invalid_tool_input", "tool_use_ids": [id_ for id_, _ in cut]}
    if cut:
        names = ", ".join(dict.fromkeys(name for _, name in cut))
        limit = cut_at(response)
        remedy = "raise max_tokens" if limit == "max_tokens" else "shorten the conversation (compact it, or start a new session)"
        reason = (
            f"the response was cut at {limit} while writing the input of {names}; the call was not run "
            f"and nothing was invented: ask for smaller steps, or {remedy}"
        )
        return reason, {"kind": "max_tokens_tool_input", "tool_use_ids": [id_ for id_, _ in cut]}
    return None


WINDOW_FULL_REMEDY = (
    "run `chronicle compact SESSION`, ask for smaller tool outputs (a narrower read or search), "
    "or use a model with a larger context window"
)


def window_full_reason(response: ModelResponse, compacted: bool | None) -> str:
    """Why a turn whose tool calls the full context window stopped ends failed. `compacted`: True when
    older turns were compacted once already in this turn, False when nothing was left to compact, None
    when automatic compaction is off."""
    names = ", ".join(dict.fromkeys(b.name for b in response.tool_uses)) or "its tool calls"
    why = {
        True: "even after compacting the older turns once",
        False: "and nothing is left to compact",
        None: "and automatic compaction is off",
    }[compacted]
    return (
        f"the model's context window is full ({CONTEXT_WINDOW_FULL}) {why}: {names} was not run, "
        f"since its result could not be read; {WINDOW_FULL_REMEDY}"
    )


def completion_note(response: ModelResponse) -> str | None:
    """Said with a completed turn whose final answer is not whole, or that ended for a reason this
    version does not know (read as the nearest of ours; the API's own value is recorded)."""
    said = response.provider_stop_reason
    if said == CONTEXT_WINDOW_FULL:
        return f"the answer was cut because the model's context window is full ({CONTEXT_WINDOW_FULL}): it may be incomplete"
    if response.stop_reason == "max_tokens":
        return "the answer was cut at max_tokens: it may be incomplete"
    if said != response.stop_reason:
        return f"the model stopped with stop reason {said!r}, which this version does not know; it was read as {response.stop_reason!r}"
    return None


#: A lone surrogate: what `"\\udce9"` in a response's JSON decodes to (a model echoing a file name it was shown
#: undecoded, say). It is not text: UTF-8 cannot hold it, so recording the response failed the turn as an internal
#: error. The API should never send one; each becomes U+FFFD where the response is taken in (`well_formed`).
_SURROGATE = re.compile("[\ud800-\udfff]")


def _mended(value: Any) -> Any:
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_mended(k): _mended(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_mended(v) for v in value]
    return value


def well_formed(response: ModelResponse) -> ModelResponse:
    """`response` with every lone surrogate in it (text, thinking, a tool call's input or name) replaced by U+FFFD,
    so that it can be recorded and sent back; the same object when it has none, as nearly every one."""
    data = response.model_dump()
    mended = _mended(data)
    return response if mended == data else ModelResponse.model_validate(mended)


def build_messages(prior: list[Message], turn: Turn) -> list[Message]:
    """The request's messages built from scratch: the specification that RequestContext's
    incremental build is tested against (the loop itself uses RequestContext)."""
    return merge_roles([*prior, *turn_messages(turn)])


class ModelCaller:
    """Streams one response, forwarding deltas to live subscribers and retrying by policy."""

    def __init__(self, io: LoopIO) -> None:
        self.io = io
        self.partial_text: list[str] = []
        #: What the provider had received when the call was cancelled (usage, model, blocks), if it says.
        self.partial: ModelResponse | None = None

    async def call(self, turn: Turn, request: ModelRequest) -> tuple[ModelResponse, int, float]:
        loop = self.io
        sid = str(turn.session_id)
        step = turn.model_calls
        attempt = 1
        started = monotonic()
        # Attachments' bytes go in only now, for a provider that sends them: events and fingerprints hold references.
        sent = with_attachment_data(request, loop.store) if getattr(loop.provider, "sends_attachment_bytes", False) else request
        prefetch_prices()  # the response will be priced: the table loads while the call is in flight
        while True:
            self.partial_text = []
            self.partial = None
            await loop.emit(MessageStart(session_id=sid, turn_id=str(turn.id), step=step, model=request.model))

            async def on_delta(delta: dict[str, Any]) -> None:
                delta = _mended(delta)  # as the response will be (well_formed): the live text is what is recorded
                if delta.get("type") == "text":
                    self.partial_text.append(delta.get("text", ""))
                await loop.emit(MessageUpdate(session_id=sid, turn_id=str(turn.id), step=step, delta=delta))

            try:
                response = well_formed(await loop.provider.stream(sent, on_delta))
            except asyncio.CancelledError as exc:
                partial = partial_of(exc)
                self.partial = well_formed(partial) if partial is not None else None
                raise
            error = response.error
            if response.stop_reason == "error" and error and error.retryable and attempt < loop.options.retry.max_attempts:
                delay = loop.options.retry.delay(attempt, error.retry_after_s)
                now = loop.clock.now()
                turn.record_retry(
                    attempt=attempt, reason=f"{error.kind}: {error.message}", delay_s=delay, now=now,
                    error=retry_error(response),
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
        """The cancelled call as recorded: what the provider had received (the answering model, the
        input tokens message_start reported, the blocks streamed), or else the streamed text."""
        if self.partial is not None:
            return self.partial.model_copy(update={"stop_reason": "aborted", "error": None})
        text = "".join(self.partial_text)
        return ModelResponse(content=[TextBlock(text=text)] if text else [], stop_reason="aborted", model=model)


def retry_error(response: ModelResponse) -> dict[str, Any]:
    """The failed attempt as recorded on its retry event: the error, and what the attempt cost.

    A stream that broke after message_start was billed for its input (and any output already
    streamed); the usage and answering model go with the retry, so `chronicle cost` counts them.
    """
    assert response.error is not None
    error = response.error.model_dump(mode="json", include={"kind", "message", "status", "retry_after_s"})
    if response.usage.used:
        error["usage"] = response.usage.model_dump(mode="json")
        error["model"] = response.model
    return error
