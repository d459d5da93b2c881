"""On a fork, turns are numbered as its conversation shows them: inherited ones first, then its own."""

from __future__ import annotations

import asyncio

import pytest

from chronicle.domain.context import build_context
from chronicle.runtime.actor import process_actor
from chronicle.runtime.app.queries import audit
from chronicle.runtime.sessions import submit_input
from chronicle.runtime.timetravel import TimeTravelError, as_of_turn, fork
from tests.helpers import response, text

from .loop_harness import Harness


def said(view) -> list[str]:  # type: ignore[no-untyped-def]
    return [b.text for m in build_context(view.turns) for b in m.content if b.type == "text"]


def test_history_and_fork_at_a_turn_of_a_fork_count_the_inherited_turns_first(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [[response(text("one"))], [response(text("two"))], [response(text("three"))]])
    h.run("first")
    h.run("second")
    child = fork(h.store, h.session_id, 2)
    submit_input(h.store, child.id, "third")
    assert asyncio.run(h.loop.run_next(child.id)).status == "completed"

    assert said(as_of_turn(h.store, child.id, 1)) == ["first", "one"]
    assert said(as_of_turn(h.store, child.id, 2)) == ["first", "one", "second", "two"]
    # The script answers turn 3 with its third entry: a fork numbers its own turns after the inherited ones.
    assert said(as_of_turn(h.store, child.id, 3)) == ["first", "one", "second", "two", "third", "three"]
    assert [t.number for t in h.store.head_turns(h.store.session(child.id))] == [1, 2, 3]
    starts = [row for row in audit(h.store, session=child.id) if row["kind"] == "turn_start"]
    assert [row["turn"] for row in starts] == [3]  # audit counts as history --at does
    with pytest.raises(TimeTravelError, match=r"has 3 turn\(s\) \(2 inherited"):
        as_of_turn(h.store, child.id, 4)

    grandchild = fork(h.store, child.id, 1)
    assert said(as_of_turn(h.store, grandchild.id, 1)) == ["first", "one"]
    assert grandchild.forked_from == {"session_id": str(child.id), "turn": 1, "actor": process_actor()}


def test_a_fork_continued_by_another_process_numbers_its_turns_on(db_url, workspace, tmp_path):
    """The store that made the fork knows what it inherited without asking; another process
    (a new store) reads it once from the fork's first version: both number the same way."""
    answers = [[response(text(word))] for word in ("one", "two", "three", "four")]
    (tmp_path / "a").mkdir()
    h = Harness(db_url, workspace, tmp_path / "a", answers)
    h.run("first")
    h.run("second")
    child = fork(h.store, h.session_id, 2)
    submit_input(h.store, child.id, "third")
    assert asyncio.run(h.loop.run_next(child.id)).status == "completed"
    (tmp_path / "b").mkdir()
    other = Harness(db_url, workspace, tmp_path / "b", answers)
    submit_input(other.store, child.id, "fourth")
    assert asyncio.run(other.loop.run_next(child.id)).status == "completed"
    assert [t.number for t in other.store.head_turns(other.store.session(child.id))] == [1, 2, 3, 4]
    assert other.store.first_head(child.id) == h.store.first_head(child.id) == tuple(h.store.session(h.session_id).head)
    assert said(as_of_turn(other.store, child.id, 4))[-2:] == ["fourth", "four"]
    assert other.store.first_head(h.session_id) == ()
