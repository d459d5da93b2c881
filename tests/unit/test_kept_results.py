"""A result kept before its step closes is stored once and read back whole (Turn.ToolResultsKept)."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any
from uuid import uuid4

import pytest

from chronicle.domain.content import ModelResponse, TextBlock, ToolUseBlock
from chronicle.domain.errors import DomainError
from chronicle.domain.ids import tool_call_id
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn
from chronicle.domain.turn_steps import kept_ref

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc)


def turn_with_two_calls() -> tuple[Turn, list[ToolCall]]:
    turn = Turn(id=uuid4(), session_id=uuid4(), input_id="i1", number=1, input_text="hi", agent="main", timestamp=NOW)
    turn.start(NOW)
    uses = [ToolUseBlock(id="tu_1", name="bash", input={"command": "ls"}), ToolUseBlock(id="tu_2", name="read_file", input={"path": "a"})]
    step = turn.record_response(ModelResponse(content=[TextBlock(text="two"), *uses], stop_reason="tool_use"), NOW)
    calls = [ToolCall(id=tool_call_id(turn.id, step, u.id), session_id=turn.session_id, turn_id=turn.id, step=step, tool_use_id=u.id,
                      name=u.name, input=u.input, flags={}, timestamp=NOW) for u in uses]
    return turn, calls


def replayed(aggregate: Any) -> Any:
    """The aggregate as a reload from its events gives it."""
    rebuilt = None
    for event in list(aggregate.pending_events):
        rebuilt = event.mutate(rebuilt)
    return rebuilt


def test_a_kept_result_is_referred_to_by_the_closing_event_and_resolved_on_replay():
    turn, (bash, read) = turn_with_two_calls()
    bash.start(NOW)
    bash.complete("file_a\nfile_b", NOW)
    turn.keep_results([bash, read], NOW)  # read has not run: only bash's result is kept
    turn.keep_results([bash], NOW)  # kept once
    read.complete("contents", NOW)
    turn.close_step([bash, read], NOW)

    events = list(turn.pending_events)
    kept = [e for e in events if isinstance(e, Turn.ToolResultsKept)]
    closing = next(e for e in events if isinstance(e, Turn.ToolResultsRecorded))
    assert [b["tool_use_id"] for e in kept for b in e.blocks] == ["tu_1"]
    assert closing.blocks[0] == kept_ref("tu_1") and closing.blocks[1]["content"] == "contents"

    again = replayed(turn)
    assert [(b["tool_use_id"], b["content"]) for b in again.steps[0]["results"]] == [("tu_1", "file_a\nfile_b"), ("tu_2", "contents")]
    assert "kept" not in again.steps[0]  # the step's state holds each result once
    # the calls' own events carry no output; read back, each result comes from the turn
    assert [e.output for c in (bash, read) for e in c.pending_events if isinstance(e, ToolCall.Completed)] == [None, None]
    reloaded = replayed(bash)
    assert reloaded.output is None and again.result_of(reloaded).content == "file_a\nfile_b"
    with pytest.raises(DomainError, match="kept by turn"):
        reloaded.result_block()


def test_a_step_closed_after_a_reload_takes_the_kept_result_and_a_reference_to_nothing_is_refused():
    turn, (bash, read) = turn_with_two_calls()
    bash.start(NOW)
    bash.complete("done", NOW)
    turn.keep_results([bash], NOW)
    turn, bash = replayed(turn), replayed(bash)  # the process stopped; the step is closed by the next one
    read.fail("no such file", NOW)
    turn.close_step([bash, read], NOW)
    assert turn.result_for(0, "tu_1") == {"type": "tool_result", "tool_use_id": "tu_1", "content": "done", "is_error": False}

    orphan, _ = turn_with_two_calls()
    with pytest.raises(DomainError, match="never recorded"):
        orphan._tool_results_recorded(step=0, blocks=[kept_ref("tu_1"), kept_ref("tu_2")], timestamp=NOW)
