"""Session.ModelChanged, given events → expect events: the session's model is one recorded fact."""

from __future__ import annotations

from datetime import datetime, timezone
from uuid import uuid4

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.errors import DomainError
from chronicle.domain.session import Session

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=timezone.utc)


def started(model: str = "claude-a") -> Session:
    session = Session.start(uuid4(), AgentSpec(model=model, provider="anthropic"), NOW)
    session.collect_events()
    return session


def test_a_change_is_recorded_with_the_previous_model_and_who_and_the_spec_reads_it():
    session = started()
    assert session.change_model("claude-b", NOW, thinking_tokens=2048, actor="alice") is True
    [event] = session.collect_events()
    assert isinstance(event, Session.ModelChanged)
    assert (event.model, event.previous, event.thinking_tokens, event.actor) == ("claude-b", "claude-a", 2048, "alice")
    assert (session.spec.model, session.spec.thinking_tokens, session.current_model) == ("claude-b", 2048, "claude-b")
    assert session.spec_data["model"] == "claude-a"  # what the session started with stays as recorded


def test_the_same_model_and_budget_again_records_nothing_and_an_empty_name_is_refused():
    session = started()
    assert session.change_model("claude-a", NOW) is False
    with pytest.raises(DomainError):
        session.change_model("  ", NOW)
    with pytest.raises(DomainError):
        session.change_model("claude-b", NOW, thinking_tokens=-1)
    assert session.collect_events() == []


def test_a_change_while_a_turn_runs_leaves_that_turn_running_and_is_read_by_the_next():
    session = started()
    session.queue_input("i1", "hello", NOW)
    turn_id = uuid4()
    session.start_turn(turn_id, NOW)
    session.change_model("claude-b", NOW)
    assert session.active_turn_id == turn_id and session.status == "busy"
    assert session.spec_for(turn_id).model == "claude-a"  # the running turn (or one resumed later) keeps its model
    session.end_turn(turn_id, NOW)
    assert session.spec.model == "claude-b"
    session.queue_input("i2", "again", NOW)
    next_turn = uuid4()
    session.start_turn(next_turn, NOW)
    assert session.spec_for(next_turn).model == "claude-b" and session.spec_for(turn_id).model == "claude-a"


def test_a_v4_snapshot_runs_on_the_model_its_spec_recorded():
    state: dict = {"archived": False}
    Session.upcast_v4_v5(state)
    assert state["model_changes"] == []


def test_a_spec_without_a_thinking_budget_dumps_as_before():
    assert "thinking_tokens" not in AgentSpec(model="m").model_dump(mode="json")
    assert AgentSpec(model="m", thinking_tokens=0).model_dump(mode="json")["thinking_tokens"] == 0
