"""The incremental request context gives exactly what rebuilding from the turn gives, step after step.

Replay compares recorded fingerprints with recomputed ones, so the incremental fingerprint must
be byte-for-byte the full one, whatever the steps were (errors, steering text, merged roles).
"""

from __future__ import annotations

from datetime import datetime, timezone
from uuid import uuid4

from hypothesis import given, settings
from hypothesis import strategies as st

from chronicle.domain.content import Message, ModelResponse, TextBlock, ThinkingBlock, ToolResultBlock, ToolUseBlock
from chronicle.domain.turn import Turn
from chronicle.runtime.model_call import build_messages, fingerprint
from chronicle.runtime.providers.base import ModelRequest
from chronicle.runtime.request_context import RequestContext

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
TOOLS = [{"name": "lookup", "description": "Look up.", "input_schema": {"type": "object", "properties": {"key": {"type": "string"}}}}]
STEP_KINDS = st.sampled_from(["tool", "tool_with_steering", "error", "thinking_tool", "two_tools", "unicode_tool"])


def _turn() -> Turn:
    turn = Turn(id=uuid4(), session_id=uuid4(), input_id="i", number=2, input_text="go", agent="main", timestamp=NOW)
    turn.start(NOW)
    return turn


def _record(turn: Turn, kind: str, k: int) -> None:
    if kind == "error":
        turn.record_response(ModelResponse(stop_reason="error"), NOW)
        return
    uses = [ToolUseBlock(id=f"t{k}", name="lookup", input={"key": f"k{k}"})]
    if kind == "two_tools":
        uses.append(ToolUseBlock(id=f"u{k}", name="lookup", input={"key": "ü✓"}))
    if kind == "unicode_tool":
        uses = [ToolUseBlock(id=f"t{k}", name="lookup", input={"key": "naïve — 日本"})]
    blocks = ([ThinkingBlock(thinking="hmm", signature="sig")] if kind == "thinking_tool" else [TextBlock(text=f"step {k}")]) + uses
    turn.record_response(ModelResponse(content=blocks, stop_reason="tool_use"), NOW)
    results = [ToolResultBlock(tool_use_id=u.id, content=f"result {u.id} é") for u in uses]
    extra = [TextBlock(text="steer: be brief")] if kind == "tool_with_steering" else []
    turn.record_tool_results(results, NOW, extra=extra)


def _request(messages: list[Message], system: str = "sys") -> ModelRequest:
    return ModelRequest(model="m", system=system, messages=messages, tools=TOOLS)


PRIORS = st.sampled_from([
    [],
    [Message(role="user", content=[TextBlock(text="earlier")]), Message(role="assistant", content=[TextBlock(text="ok")])],
    # a prior context ending with the user (a failed turn): the new input merges into it
    [Message(role="user", content=[TextBlock(text="Summary of the conversation so far:\nx")])],
])


@settings(max_examples=60, deadline=None)
@given(prior=PRIORS, kinds=st.lists(STEP_KINDS, max_size=12))
def test_messages_and_fingerprint_match_a_full_rebuild_at_every_step(prior, kinds):
    turn = _turn()
    context = RequestContext(prior)
    for k, kind in enumerate([*kinds, None]):
        messages = context.messages(turn)
        assert messages == build_messages(prior, turn)
        request = _request(messages)
        assert context.fingerprint_of(request) == fingerprint(request)
        if kind is not None:
            _record(turn, kind, k)


def test_a_request_not_built_by_the_context_is_fingerprinted_in_full():
    turn = _turn()
    _record(turn, "tool", 0)
    context = RequestContext([])
    context.messages(turn)
    other = _request([Message(role="user", content=[TextBlock(text="something else")])])
    assert context.fingerprint_of(other) == fingerprint(other)


def test_a_different_turn_or_system_prompt_changes_the_fingerprint_as_a_full_rebuild_does():
    first, second = _turn(), _turn()
    second.input_text = "other input"
    context = RequestContext([])
    a = _request(context.messages(first))
    fa = context.fingerprint_of(a)
    b = _request(context.messages(second), system="another system prompt")
    fb = context.fingerprint_of(b)
    assert (fa, fb) == (fingerprint(a), fingerprint(b)) and fa != fb
