"""Turns read together (runtime/aggregate_batch.py) are the turns `store.turn` reads one by one:
a long turn from its newest snapshot and the events after it, short turns from events, a turn
still running, and a damaged row failing exactly as a single read fails — both backends."""

from __future__ import annotations

import sqlite3
from uuid import UUID

import pytest

from chronicle.domain.content import ModelResponse, TextBlock
from chronicle.runtime.aggregate_batch import load_turns
from chronicle.runtime.store import ChronicleStore, UnreadableEvent
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


def _sessions(store: ChronicleStore, count: int, inputs: int = 1) -> list[UUID]:
    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.runtime.sessions import start_session, submit_input

    ids = []
    for n in range(count):
        session, _ = start_session(store, AgentSpec(name=f"a{n}", provider="scripted", model="m"), "hello")
        for i in range(inputs - 1):
            submit_input(store, session.id, f"more {i}")
        ids.append(session.id)
    return ids


def test_every_session_is_read_in_batches_as_a_single_read_gives_it(db_url, monkeypatch):
    """`store.sessions()` (resume --all, self-repair, the outbox) reads sessions together: a long
    session from its newest snapshot (a Session keeps each one it took) and the events after it,
    short ones from their events; each equal to `store.session`, none read alone."""
    store = ChronicleStore(db_url)
    long, *short = _sessions(store, 1, inputs=230) + _sessions(store, 3)
    assert snapshot_versions(store, long) == [100, 200]
    store.close()

    cold = ChronicleStore(db_url)
    monkeypatch.setattr(cold, "session", lambda *_a, **_k: pytest.fail("a session was read alone: the batch did not load it"))
    listed = {s.id: s for s in cold.sessions()}
    monkeypatch.undo()
    assert list(listed) == [long, *short]
    for sid in listed:
        alone = ChronicleStore(db_url)
        assert vars(listed[sid]) == vars(alone.session(sid)), sid
        alone.close()
    assert listed[long].version == 231 and len(listed[long].queue) == 230
    cold.close()


def test_a_session_that_does_not_load_is_skipped_and_named_and_the_others_are_listed(sqlite_url):
    store = ChronicleStore(sqlite_url)
    good, bad, other = _sessions(store, 3)
    table = store.recorder.events_table_name  # type: ignore[attr-defined]
    store.close()
    with sqlite3.connect(sqlite_url[len("sqlite:///"):]) as conn:
        conn.execute(f"UPDATE {table} SET state = x'ff00ff' WHERE originator_id = ? AND originator_version = 2", (bad.hex,))
    cold = ChronicleStore(sqlite_url)
    skipped: list[tuple[UUID, Exception]] = []
    assert [s.id for s in cold.sessions(on_error=lambda sid, exc: skipped.append((sid, exc)))] == [good, other]
    assert [sid for sid, _ in skipped] == [bad] and isinstance(skipped[0][1], UnreadableEvent)
    assert "event 2" in str(skipped[0][1])
    cold.close()


def test_a_session_whose_newest_snapshot_does_not_decode_is_read_from_its_events(sqlite_url):
    store = ChronicleStore(sqlite_url)
    (long,) = _sessions(store, 1, inputs=120)
    snapshots = store.snapshots.recorder.events_table_name  # type: ignore[union-attr]
    expected = vars(store.session(long))
    store.close()
    with sqlite3.connect(sqlite_url[len("sqlite:///"):]) as conn:
        conn.execute(f"UPDATE {snapshots} SET state = x'ff00ff' WHERE originator_id = ?", (long.hex,))
    cold = ChronicleStore(sqlite_url)
    (listed,) = list(cold.sessions())
    assert vars(listed) == expected
    cold.close()


def test_the_session_index_is_read_once_then_only_its_new_entries(db_url, monkeypatch):
    """`session_ids` (every listing, scan of all sessions and worker rescan) replayed the whole index each time; a
    store now reads the entries after the last one it saw, and still sees what another store appended."""
    store = ChronicleStore(db_url)
    first = _sessions(store, 2)
    assert store.session_ids() == first
    reads: list[object] = []
    real = store.session_index.get
    monkeypatch.setattr(store.session_index, "get", lambda **kw: reads.append(kw.get("gt")) or real(**kw))
    other = ChronicleStore(db_url)
    later = _sessions(other, 1)
    other.unlist_session(first[0], "a repair withdrew it")
    other.close()
    assert store.session_ids() == [first[1], *later]
    assert reads == [2], "only the entries after the two already read"
    store.close()
