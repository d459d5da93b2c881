"""The DelegatedTask lifecycle as given events → expected events, and what reflections are matched on."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from chronicle.domain.errors import IllegalTransition
from chronicle.domain.task_board import DelegatedTask, keywords

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
