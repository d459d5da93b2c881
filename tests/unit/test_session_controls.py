"""Session commands for steering, cancel requests and compaction: given a session, expect events."""

from __future__ import annotations

from datetime import datetime, timezone
from uuid import uuid4

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.errors import DomainError
from chronicle.domain.session import Session

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def session_with_turns(count: int) -> tuple[Session, list]:
    session = Session.start(uuid4(), AgentSpec(), NOW)
    ids = []
    for i in range(count):
        session.queue_input(f"in{i}", f"input {i}", NOW)
        turn_id = uuid4()
        session.start_turn(turn_id, NOW)
        session.end_turn(turn_id, NOW)
        ids.append(turn_id)
    return session, ids


def test_steering_an_idle_session_queues_a_normal_input():
    session, _ = session_with_turns(1)
    assert session.steer("s1", "do this", NOW) == "queued"
    assert session.next_input["text"] == "do this" and session.steering == []


def test_steering_left_undelivered_when_the_turn_ends_becomes_the_next_input():
    session, _ = session_with_turns(0)
    session.queue_input("a", "first", NOW)
    turn_id = uuid4()
    session.start_turn(turn_id, NOW)
    assert session.steer("s1", "change course", NOW) == "steering"
    session.end_turn(turn_id, NOW)
    names = [type(e).__name__ for e in session.collect_events()]
    assert names[-2:] == ["TurnEnded", "SteeringRequeued"]
    assert session.next_input == {**session.next_input, "input_id": "s1", "text": "change course", "kind": "steering"}


def test_steering_a_named_turn_that_has_ended_is_refused_and_records_nothing():
    session, [ended] = session_with_turns(1)
    session.collect_events()
    with pytest.raises(DomainError, match=f"turn {ended} has ended \\(no turn is running\\)"):
        session.steer("s1", "too late", NOW, turn_id=ended)
    session.queue_input("b", "again", NOW)
    running = uuid4()
    session.start_turn(running, NOW)
    session.collect_events()
    with pytest.raises(DomainError, match=f"turn {running} is running now"):
        session.steer("s2", "too late", NOW, turn_id=ended)
    assert session.collect_events() == [] and session.steering == []
    assert session.steer("s3", "this one", NOW, turn_id=running) == "steering"
    assert [s["steer_id"] for s in session.steering] == ["s3"]


def test_steering_a_turn_the_session_never_had_says_so_rather_than_that_it_ended():
    session, [ended] = session_with_turns(1)
    session.collect_events()
    stranger = uuid4()
    with pytest.raises(DomainError, match=f"session {session.id} has no turn {stranger}; nothing was steered"):
        session.steer("s1", "hello?", NOW, turn_id=stranger)
    undone = session.undo(1, NOW)
    with pytest.raises(DomainError, match=f"turn {ended} has ended"):  # an undone turn is still the session's
        session.steer("s2", "too late", NOW, turn_id=ended)
    assert undone == [ended] and [type(e).__name__ for e in session.collect_events()] == ["TurnsUndone"]


def test_a_cancel_request_needs_a_running_turn_and_is_cleared_when_the_turn_ends():
    session, _ = session_with_turns(1)
    with pytest.raises(DomainError, match="nothing to cancel"):
        session.request_cancel("stop", NOW)
    session.queue_input("b", "again", NOW)
    turn_id = uuid4()
    session.start_turn(turn_id, NOW)
    assert session.request_cancel("stop", NOW) == turn_id
    session.end_turn(turn_id, NOW)
    assert session.cancel_requested is None


def test_compaction_replaces_a_prefix_of_the_head_until_undo_cuts_into_it():
    session, ids = session_with_turns(3)
    session.compact(ids[:2], "summary", "summary", NOW)
    assert session.context_view() == ("summary", ids[2:])
    session.undo(2, NOW)
    assert session.context_view() == (None, ids[:1])
    session.redo(NOW)
    assert session.context_view() == ("summary", ids[2:])


def test_only_the_oldest_turns_can_be_compacted():
    session, ids = session_with_turns(3)
    with pytest.raises(DomainError, match="oldest turns"):
        session.compact(ids[1:2], "s", "summary", NOW)
