"""The DelegatedTask lifecycle as given events → expected events, and what reflections are matched on."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from chronicle.domain.errors import IllegalTransition
from chronicle.domain.task_board import DelegatedTask, TaskClaimRefused, keywords

NOW = datetime(2026, 1, 5, tzinfo=UTC)


def opened() -> DelegatedTask:
    return DelegatedTask(id=uuid4(), parent_session_id=uuid4(), parent_tool_call_id=uuid4(), child_session_id=uuid4(),
                         index=0, agent="researcher", task="Count the widgets in inventory.csv", timestamp=NOW)


def names(task: DelegatedTask) -> list[str]:
    return [type(e).__qualname__ for e in task.collect_events()]


def test_a_task_is_claimed_then_completed():
    task = opened()
    task.claim("researcher", NOW)
    task.complete("42", NOW)
    assert names(task) == ["DelegatedTask.Opened", "DelegatedTask.Claimed", "DelegatedTask.Completed"]
    assert (task.status, task.summary, task.claimed_by) == ("completed", "42", "researcher")


def test_a_failed_task_records_one_reflection_and_a_finished_task_cannot_move_again():
    task = opened()
    task.fail("the child crashed", NOW)
    task.reflect("no turn", "the child crashed", NOW)
    task.reflect("again", "again", NOW)
    assert names(task)[-2:] == ["DelegatedTask.Failed", "DelegatedTask.ReflectionRecorded"]
    assert task.reflection is not None and task.reflection["keywords"] == ["count", "inventory.csv", "widgets"]
    with pytest.raises(IllegalTransition):
        task.claim("researcher", NOW)
    with pytest.raises(IllegalTransition):
        opened().complete("never claimed", NOW)


def test_a_completed_task_gets_no_reflection():
    task = opened()
    task.claim("r", NOW)
    task.complete("ok", NOW)
    task.reflect("x", "y", NOW)
    assert task.reflection is None


def test_keywords_skip_short_words_and_stopwords_and_are_sorted():
    assert keywords("Fix the parser for the CSV files, then test it") == ["parser", "test"]


def posted(agent: str = "") -> DelegatedTask:
    return DelegatedTask.post(uuid4(), uuid4(), agent, "Count the widgets in inventory.csv", NOW)


def test_a_posted_task_has_no_child_until_one_claims_it_and_replays_to_the_same_state():
    task = posted()
    assert (task.status, task.child_session_id, task.index, task.agent, task.posted) == ("pending", None, None, "", True)
    child, call = uuid4(), uuid4()
    task.claim_for_child("researcher", child, call, 2, NOW)
    task.complete("42", NOW)
    events = task.collect_events()
    assert [type(e).__qualname__ for e in events] == ["DelegatedTask.Posted", "DelegatedTask.ClaimedByChild", "DelegatedTask.Completed"]
    replayed = None
    for e in events:
        replayed = e.mutate(replayed)
    assert replayed is not None
    assert (replayed.status, replayed.agent, replayed.claimed_by, replayed.child_session_id, replayed.parent_tool_call_id,
            replayed.index, replayed.summary, replayed.posted) == ("completed", "researcher", "researcher", child, call, 2, "42", True)


def test_a_posted_task_refuses_another_agent_a_second_child_and_any_child_once_settled_recording_nothing():
    named = posted("auditor")
    with pytest.raises(TaskClaimRefused, match="is for agent 'auditor', not 'researcher'"):
        named.claim_for_child("researcher", uuid4(), uuid4(), 0, NOW)
    named.claim_for_child("Auditor", uuid4(), uuid4(), 0, NOW)  # names compare as the delegate tool compares them
    with pytest.raises(TaskClaimRefused, match="already in_progress .claimed by 'Auditor'"):
        named.claim_for_child("auditor", uuid4(), uuid4(), 1, NOW)
    named.fail("broke", NOW)
    assert named.claim_refusal("auditor", uuid4()) is not None and "already failed" in named.claim_refusal("auditor", uuid4())
    assert names(named) == ["DelegatedTask.Posted", "DelegatedTask.ClaimedByChild", "DelegatedTask.Failed"]


def test_a_task_a_delegate_call_opened_for_its_own_child_cannot_be_claimed_by_another():
    refusal = opened().claim_refusal("researcher", uuid4())
    assert refusal is not None and "only a task added to a board can be claimed" in refusal
