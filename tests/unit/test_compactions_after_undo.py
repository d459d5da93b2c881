"""Session.held_compaction: the compaction the model reads the branch's first turns through is the newest whose turns
are all still on the branch; an undo ends only those that cover a turn it took back, a redo brings them back."""

from __future__ import annotations

from uuid import uuid4

from chronicle.domain.session import Session
from tests.unit.test_session_controls import NOW, session_with_turns


def test_an_undo_ends_the_compactions_covering_an_undone_turn_and_the_one_before_holds_again():
    session, ids = session_with_turns(5)
    session.compact(ids[:3], "moved 1-3", "workspace", NOW)
    session.compact(ids[:4], "summary 1-4", "summary", NOW)
    session.compact(ids[:5], "summary 1-4", "truncate", NOW)
    assert session.context_view() == ("summary 1-4", [])
    session.undo(1, NOW)
    assert session.context_view() == ("summary 1-4", [])  # was (None, ids[:4]): every turn whole again
    assert session.held_compaction["strategy"] == "summary" and session.held_compaction["compacted_turn_ids"] == ids[:4]
    session.undo(1, NOW)
    assert session.context_view() == ("moved 1-3", [])
    session.undo(3, NOW)
    assert session.context_view() == (None, []) and session.held_compaction is None
    session.redo(NOW)
    assert session.context_view() == ("moved 1-3", [])
    session.redo(NOW)
    session.redo(NOW)
    assert session.context_view() == ("summary 1-4", [])
    # A new turn on a branch cut short: the compactions covering the turns it replaced never hold again.
    session.undo(2, NOW)
    session.queue_input("new", "new input", NOW)
    turn = uuid4()
    session.start_turn(turn, NOW)
    session.end_turn(turn, NOW)
    assert session.context_view() == ("moved 1-3", [turn])
    assert session.compaction["summary"] == "summary 1-4"  # the newest recorded, as before


def test_a_v8_snapshot_keeps_its_one_compaction_as_the_only_one_it_knows():
    ids = [uuid4(), uuid4()]
    snapshot = {"compaction": {"summary": "s", "compacted_turn_ids": ids, "first_kept_turn_id": None,
                               "strategy": "summary", "at": NOW.isoformat()}}
    Session.upcast_v8_v9(snapshot)
    assert snapshot["compactions"] == [{"summary": "s", "strategy": "summary", "at": NOW.isoformat(), "turns": 2, "through": ids[1]}]
    empty: dict = {"compaction": None}
    Session.upcast_v8_v9(empty)
    assert empty["compactions"] == []
