"""Turns read together (runtime/turn_batch.py) are the turns `store.turn` reads one by one:
a long turn from its newest snapshot and the events after it, short turns from events, a turn
still running, and a damaged row failing exactly as a single read fails — both backends."""

from __future__ import annotations

import sqlite3

import pytest

from chronicle.domain.content import ModelResponse, TextBlock
from chronicle.runtime.store import ChronicleStore, UnreadableEvent
from chronicle.runtime.turn_batch import load_turns
from tests.integration.test_snapshots import NOW, long_turn, snapshot_versions
from tests.integration.test_turn_messages_cache import turn_with_one_step


def test_turns_read_together_equal_turns_read_one_by_one(db_url, monkeypatch):
    store = ChronicleStore(db_url)
    long = long_turn(store, 60)  # 124 events: a snapshot at 100, then events after it
    long.record_response(ModelResponse(content=[TextBlock(text="done")], stop_reason="end_turn"), NOW)
    long.complete(NOW)
    store.save(long)
    assert snapshot_versions(store, long.id) == [100]
    short = [turn_with_one_step(store, n, finish=True).id for n in (1, 2)]
    running = turn_with_one_step(store, 3, finish=False).id
    ids = [short[0], long.id, running, short[1]]

    cold = ChronicleStore(db_url)
    monkeypatch.setattr(cold, "turn", lambda *_: pytest.fail("a turn was read alone: the batch did not load it"))
    together = load_turns(cold, ids)
    assert list(together) == ids
    for turn_id in ids:
        alone = ChronicleStore(db_url).turn(turn_id)
        assert vars(together[turn_id]) == vars(alone), turn_id
    assert together[long.id].version == long.version == 124 and together[running].status == "running"


def test_a_damaged_turn_fails_as_a_single_read_does_and_the_others_still_load(sqlite_url):
    store = ChronicleStore(sqlite_url)
    good, bad = (turn_with_one_step(store, n, finish=True).id for n in (1, 2))
    table = store.recorder.events_table_name  # type: ignore[attr-defined]
    with sqlite3.connect(sqlite_url[len("sqlite:///"):]) as conn:
        conn.execute(f"UPDATE {table} SET state = x'ff00ff' WHERE originator_id = ? AND originator_version = 2", (bad.hex,))
    cold = ChronicleStore(sqlite_url)
    with pytest.raises(UnreadableEvent, match="event 2"):
        cold.turn(bad)
    with pytest.raises(UnreadableEvent, match="event 2"):
        load_turns(cold, [good, bad])
    assert load_turns(cold, [good])[good].status == "completed"


def test_a_sessions_aggregates_are_named_from_its_turns_read_together(db_url, workspace, tmp_path, monkeypatch):
    """`log`, `verify`, `export` list a session's aggregates: its turns in one batch, each tool
    call's id derived from its turn, none read alone (that was a query per turn and per call)."""
    from tests.helpers import response, text, tool_use

    from .loop_harness import Harness

    h = Harness(db_url, workspace, tmp_path, [
        [response(tool_use("t1", "read_file", path="hello.txt"), tool_use("t2", "list_dir", path=".")), response(text("read"))],
        [response(tool_use("t3", "list_dir", path=".")), response(text("listed"))],
    ])
    h.run("first")
    h.run("second")
    session = h.store.session(h.session_id)
    named_before = [session.id]  # what aggregate_ids_of named when it read every turn and call alone
    for turn_id in session.turns:
        named_before += [turn_id, *(call.id for call in h.store.tool_calls_of(h.store.turn(turn_id)))]
    assert len(named_before) == 1 + 2 + 3

    cold = ChronicleStore(db_url)
    monkeypatch.setattr(cold, "turn", lambda *_: pytest.fail("a turn was read alone"))
    monkeypatch.setattr(cold, "find_tool_call", lambda *_: pytest.fail("a tool call was read to learn its id"))
    assert cold.aggregate_ids_of(cold.session(h.session_id)) == named_before
