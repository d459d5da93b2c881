"""`history --at TURN --step N`: what the model was sent for one call inside a turn.

The oracle is the request itself: the real loop runs against a provider that keeps every request
it answered, and each call's messages must equal what `history` shows for that turn and step, from
the history projection's rows and from events alike, on both backends: several tool steps per
turn, a compaction made mid-conversation (its summary sent first), and a fork whose first turn was
inherited from its parent (its steps were taken before the fork existed).
"""

from __future__ import annotations

from typing import Any

import pytest

from chronicle.runtime.app import queries
from chronicle.runtime.app.errors import AppError
from chronicle.runtime.past_context import context_at, history_engine, wire_at
from chronicle.runtime.past_wire import wire_at_step
from chronicle.runtime.timetravel import cut_at_step, fork
from tests.helpers import response, text, tool_use

from .loop_harness import Harness


def _three_steps(n: int) -> list[dict[str, Any]]:
    return [
        response(text(f"reading {n}"), tool_use(f"tu_{n}a", "read_file", path="hello.txt")),
        response(text("and the folder"), tool_use(f"tu_{n}b", "list_dir", path=".")),
        response(text(f"done {n}")),
    ]


def _sent(h: Harness, sid: Any) -> list[tuple[int, int, list[dict[str, Any]]]]:
    """(turn number as the request named it, its call index, the messages sent) of every model call for the session."""
    return [(r.turn_number, r.call_index, [m.wire() for m in r.messages])
            for r in h.provider.requests if r.auxiliary is None and r.session_id == str(sid)]


def test_each_step_shows_exactly_what_the_model_was_sent(db_url, workspace, tmp_path):
    (workspace / "hello.txt").write_text("hello\n")
    h = Harness(db_url, workspace, tmp_path, [_three_steps(n) for n in range(1, 6)], auto_approve=True)
    for prompt in ("one", "two", "three"):
        assert h.run(prompt).status == "completed"
    store, sid = h.store, h.session_id
    first = store.session(sid).head[0]
    store.update_session(sid, lambda s: s.compact([first], "they said one", "summary", s.created_at))
    assert h.run("four").status == "completed"

    sent = _sent(h, sid)
    assert len(sent) == 12 and {step for _, step, _ in sent} == {0, 1, 2}
    assert "Summary of the conversation" in str(sent[-1][2][0])  # the fourth turn was sent the summary first
    engine = history_engine(store)
    engine.catch_up()
    for turn, step, messages in sent:
        assert queries.history(store, sid, at=turn, step=step) == messages, (turn, step)
        cut = cut_at_step(store, sid, turn, step)
        assert [m.wire() for m in context_at(store, cut)] == messages  # from events, without the projection
        assert [m.wire() for m in queries.history_messages(store, sid, at=turn, step=step)] == messages

    # A fork's inherited turn shows its steps as its parent was sent them; its own turns, as it was.
    child = fork(store, sid, 2)
    h.session_id = child.id
    assert h.run("five").status == "completed"
    engine.catch_up()
    parent_turn_two = {step: m for turn, step, m in sent if turn == 2}
    for step, messages in parent_turn_two.items():
        assert wire_at(store, cut_at_step(store, child.id, 2, step), engine) == messages
    own = _sent(h, child.id)
    assert len(own) == 3
    for turn, step, messages in own:
        assert queries.history(store, child.id, at=turn, step=step) == messages, (turn, step)
    store.close()


def test_a_session_whose_branch_only_grew_is_read_from_rows_alone(db_url, workspace, tmp_path):
    """No undo, compaction or fork: the step's context is the conversation as of the previous turn's
    end plus the turn's own rows, found by index (`wire_at_step`), and it is what was sent."""
    (workspace / "hello.txt").write_text("hello\n")
    h = Harness(db_url, workspace, tmp_path, [_three_steps(n) for n in range(1, 5)], auto_approve=True)
    for prompt in ("one", "two", "three"):
        assert h.run(prompt).status == "completed"
    store, sid = h.store, h.session_id
    engine = history_engine(store)
    engine.catch_up()
    sent = _sent(h, sid)
    assert len(sent) == 9
    for turn, step, messages in sent:
        assert wire_at_step(store, sid, turn, step, engine) == messages, (turn, step)
        assert queries.history(store, sid, at=turn, step=step) == messages
    assert wire_at_step(store, sid, 2, 7, engine) is None  # no such step: the general path says why
    # A turn the projection has not applied yet is not answered from rows.
    assert h.run("four").status == "completed"
    assert wire_at_step(store, sid, 4, 0, engine) is None
    engine.catch_up()
    assert wire_at_step(store, sid, 4, 0, engine) == _sent(h, sid)[-3][2]
    store.close()


def test_a_step_that_does_not_exist_is_a_usage_error(db_url, workspace, tmp_path):
    (workspace / "hello.txt").write_text("hello\n")
    h = Harness(db_url, workspace, tmp_path, [_three_steps(1)], auto_approve=True)
    assert h.run("one").status == "completed"
    with pytest.raises(AppError, match="has no step 3") as missing:
        queries.history(h.store, h.session_id, at=1, step=3)
    assert missing.value.code == 2
    with pytest.raises(AppError, match="--at TURN"):
        queries.history(h.store, h.session_id, step=0)
    with pytest.raises(AppError, match="TURN must be 1..1"):
        queries.history(h.store, h.session_id, at=2, step=0)
    h.store.close()
