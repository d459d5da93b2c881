"""Every legal transition of every aggregate kind is accepted; everything else raises and records nothing."""

from __future__ import annotations

from datetime import datetime, timezone
from uuid import uuid4

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.content import ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock
from chronicle.domain.errors import DomainError, IllegalTransition
from chronicle.domain.session import SESSION_LIFECYCLE, Session
from chronicle.domain.tool_call import TOOL_CALL_LIFECYCLE, ToolCall
from chronicle.domain.turn import TURN_LIFECYCLE, Turn

NOW = datetime(2026, 11, 21, 12, 0, tzinfo=timezone.utc)


def new_tool_call() -> ToolCall:
    return ToolCall(id=uuid4(), session_id=uuid4(), turn_id=uuid4(), step=0, tool_use_id="tu_1", name="read_file",
                    input={"path": "a"}, flags={"read_only": True}, timestamp=NOW)


def new_turn() -> Turn:
    return Turn(id=uuid4(), session_id=uuid4(), input_id="i1", number=1, input_text="hi", agent="main", timestamp=NOW)


def tool_call_in(state: str) -> ToolCall:
    """Drive a fresh tool call into `state` through legal commands only."""
    call = new_tool_call()
    paths = {
        "pending": [],
        "awaiting_approval": ["request_approval"],
        "approved": ["request_approval", "approve"],
        "denied": ["request_approval", "deny"],
        "running": ["start"],
        "completed": ["start", "complete"],
        "failed": ["fail"],
        "skipped": ["skip"],
        "cancelled": ["cancel"],
        "interrupted": ["start", "interrupt"],
    }
    for trigger in paths[state]:
        fire_tool_call(call, trigger)
    assert call.status == state
    return call


def fire_tool_call(call: ToolCall, trigger: str) -> None:
    commands = {
        "request_approval": lambda: call.request_approval(NOW),
        "approve": lambda: call.approve(NOW),
        "deny": lambda: call.deny(NOW),
        "start": lambda: call.start(NOW),
        "complete": lambda: call.complete("out", NOW),
        "fail": lambda: call.fail("boom", NOW),
        "skip": lambda: call.skip("steered", NOW),
        "cancel": lambda: call.cancel("user", NOW),
        "interrupt": lambda: call.interrupt("crash", NOW),
    }
    commands[trigger]()


TOOL_CASES = [(s, t) for s in TOOL_CALL_LIFECYCLE.states for t in sorted({e.trigger for e in TOOL_CALL_LIFECYCLE.edges})]


@pytest.mark.parametrize(("state", "trigger"), TOOL_CASES)
def test_tool_call_accepts_exactly_the_transitions_its_table_declares(state, trigger):
    call = tool_call_in(state)
    version = call.version
    if TOOL_CALL_LIFECYCLE.can(trigger, state):
        fire_tool_call(call, trigger)
        assert call.status == TOOL_CALL_LIFECYCLE.next_state(trigger, state)
        assert call.version > version
    else:
        with pytest.raises(IllegalTransition):
            fire_tool_call(call, trigger)
        assert call.version == version and call.status == state


def test_a_non_idempotent_interrupted_tool_call_is_never_started_again():
    call = tool_call_in("interrupted")
    call.flags = {"read_only": False, "idempotent": False}
    with pytest.raises(DomainError, match="never run twice"):
        call.start(NOW)
    assert call.status == "interrupted"


def test_every_resolved_tool_call_answers_with_exactly_one_result():
    for state in ("completed", "failed", "denied", "skipped", "cancelled", "interrupted"):
        block = tool_call_in(state).result_block()
        assert block.tool_use_id == "tu_1"
        assert block.is_error is (state != "completed")
    with pytest.raises(DomainError):
        tool_call_in("running").result_block()


@pytest.mark.parametrize("state", TOOL_CALL_LIFECYCLE.states)
def test_only_a_cancelled_or_failed_call_records_the_late_end_of_a_function_left_running(state):
    call = tool_call_in(state)
    version, result = call.version, call.result() if call.resolved and state != "completed" else None
    if state in ("cancelled", "failed"):
        call.record_late_end(False, "charged", 1500.0, NOW)
        [late] = call.collect_events()[-1:]
        assert (type(late).__qualname__, late.raised, late.output, late.duration_ms) == ("ToolCall.FinishedAfterAbandon", False, "charged", 1500.0)
        assert call.status == state and call.result() == result  # what the model read stays what it read
    else:
        with pytest.raises(DomainError, match="only a call that ended while its function ran on"):
            call.record_late_end(True, "boom", 1.0, NOW)
        assert call.version == version and call.status == state


def turn_in(state: str) -> Turn:
    turn = new_turn()
    paths = {
        "pending": [], "running": ["start"], "awaiting_approval": ["start", "await_approval"],
        "completed": ["start", "complete"], "failed": ["fail"], "cancelled": ["cancel"],
        "stopped": ["start", "stop"], "interrupted": ["start", "interrupt"],
    }
    for trigger in paths[state]:
        fire_turn(turn, trigger)
    assert turn.status == state
    return turn


def fire_turn(turn: Turn, trigger: str) -> None:
    commands = {
        "start": lambda: turn.start(NOW),
        "await_approval": lambda: turn.await_approval([uuid4()], NOW),
        "resume": lambda: turn.resume("answered", NOW),
        "complete": lambda: turn.complete(NOW),
        "fail": lambda: turn.fail("boom", NOW),
        "cancel": lambda: turn.cancel("user", NOW),
        "stop": lambda: turn.stop("budget", "over budget", NOW),
        "interrupt": lambda: turn.interrupt("crash", NOW),
    }
    commands[trigger]()


TURN_CASES = [(s, t) for s in TURN_LIFECYCLE.states for t in sorted({e.trigger for e in TURN_LIFECYCLE.edges})]


@pytest.mark.parametrize(("state", "trigger"), TURN_CASES)
def test_turn_accepts_exactly_the_transitions_its_table_declares(state, trigger):
    turn = turn_in(state)
    version = turn.version
    if TURN_LIFECYCLE.can(trigger, state):
        fire_turn(turn, trigger)
        assert turn.status == TURN_LIFECYCLE.next_state(trigger, state)
    else:
        with pytest.raises(IllegalTransition) as raised:
            fire_turn(turn, trigger)
        assert f"cannot {trigger} while {state}" in str(raised.value)
        assert turn.version == version and turn.status == state


def test_a_turn_cannot_complete_while_tool_calls_wait_for_results():
    turn = turn_in("running")
    turn.record_response(ModelResponse(content=[ToolUseBlock(id="tu_1", name="read_file", input={})], stop_reason="tool_use"), NOW)
    with pytest.raises(DomainError, match="unanswered tool calls"):
        turn.complete(NOW)
    with pytest.raises(DomainError, match="still waits for tool results"):
        turn.record_response(ModelResponse(content=[TextBlock(text="x")]), NOW)


def test_tool_results_must_answer_every_tool_use_in_order():
    turn = turn_in("running")
    uses = [ToolUseBlock(id="a", name="x", input={}), ToolUseBlock(id="b", name="y", input={})]
    turn.record_response(ModelResponse(content=uses, stop_reason="tool_use"), NOW)
    version = turn.version
    with pytest.raises(DomainError, match="do not answer"):
        turn.record_tool_results([ToolResultBlock(tool_use_id="b", content="")], NOW)
    with pytest.raises(DomainError, match="do not answer"):
        turn.record_tool_results([ToolResultBlock(tool_use_id="b", content=""), ToolResultBlock(tool_use_id="a", content="")], NOW)
    assert turn.version == version
    turn.record_tool_results([ToolResultBlock(tool_use_id="a", content="1"), ToolResultBlock(tool_use_id="b", content="2")], NOW)
    assert turn.open_step is None


def test_session_runs_one_turn_at_a_time_taking_inputs_in_order():
    session = Session.start(uuid4(), AgentSpec(), NOW)
    session.queue_input("first", "one", NOW)
    session.queue_input("second", "two", NOW)
    assert session.start_turn(uuid4(), NOW)["input_id"] == "first"
    with pytest.raises(IllegalTransition):
        session.start_turn(uuid4(), NOW)
    session.end_turn(session.active_turn_id, NOW)
    assert session.start_turn(uuid4(), NOW)["input_id"] == "second"
    assert [e.trigger for e in SESSION_LIFECYCLE.edges] == ["start_turn", "end_turn"]


def test_undo_keeps_turns_and_a_new_turn_after_undo_drops_the_redo_branch():
    session = Session.start(uuid4(), AgentSpec(), NOW)
    turns = []
    for n in range(3):
        session.queue_input(f"i{n}", f"input {n}", NOW)
        turns.append(uuid4())
        session.start_turn(turns[-1], NOW)
        session.end_turn(turns[-1], NOW)
    assert session.undo(2, NOW) == turns[1:]
    assert session.head == turns[:1] and session.turns == turns
    assert session.redo(NOW) == turns[1:] and session.head == turns
    session.undo(1, NOW)
    session.queue_input("i9", "new branch", NOW)
    session.start_turn(uuid4(), NOW)
    assert session.redo_stack == []
    with pytest.raises(DomainError, match="busy"):
        session.undo(1, NOW)
