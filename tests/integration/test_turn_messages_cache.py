"""Finished turns' messages are parsed once per process; turns in flight are always read fresh."""

from __future__ import annotations

from datetime import datetime, timezone
from uuid import uuid4

from chronicle.domain.content import ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock
from chronicle.domain.context import build_context
from chronicle.domain.turn import Turn
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.turn_messages import context_of, turn_messages_cache

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def turn_with_one_step(store: ChronicleStore, number: int, finish: bool) -> Turn:
    turn = Turn(id=uuid4(), session_id=uuid4(), input_id=f"in{number}", number=number, input_text=f"question {number}",
                agent="main", timestamp=NOW)
    turn.start(NOW)
    use = ToolUseBlock(id=f"toolu_{number}", name="lookup", input={"key": number})
    turn.record_response(ModelResponse(content=[TextBlock(text="looking"), use], stop_reason="tool_use"), NOW)
    turn.record_tool_results([ToolResultBlock(tool_use_id=use.id, content=f"record {number}")], NOW)
    if finish:
        turn.record_response(ModelResponse(content=[TextBlock(text=f"answer {number}")], stop_reason="end_turn"), NOW)
        turn.complete(NOW)
    store.save(turn)
    return turn


def test_the_context_from_cached_turns_is_the_context_built_from_fresh_loads(db_url):
    store = ChronicleStore(db_url)
    ids = [turn_with_one_step(store, n, finish=True).id for n in (1, 2, 3)]
    first = context_of(store, ids, summary="earlier")
    again = context_of(store, ids, summary="earlier")
    fresh = build_context([ChronicleStore(db_url).turn(t) for t in ids], summary="earlier")
    assert [m.wire() for m in first] == [m.wire() for m in again] == [m.wire() for m in fresh]
    assert all(t in turn_messages_cache(store) for t in ids)


def test_a_turn_in_flight_is_never_cached_so_its_new_steps_are_seen(db_url):
    store = ChronicleStore(db_url)
    running = turn_with_one_step(store, 1, finish=False)
    before = context_of(store, [running.id])
    assert running.id not in turn_messages_cache(store)
    running.record_response(ModelResponse(content=[TextBlock(text="answer 1")], stop_reason="end_turn"), NOW)
    running.complete(NOW)
    store.save(running)
    after = context_of(store, [running.id])
    assert len(after) == len(before) + 1 and after[-1].wire()["content"][0]["text"] == "answer 1"
    assert running.id in turn_messages_cache(store)


def test_the_returned_lists_are_copies_so_callers_cannot_change_the_cache(sqlite_url):
    store = ChronicleStore(sqlite_url)
    done = turn_with_one_step(store, 1, finish=True)
    cache = turn_messages_cache(store)
    cache.of(done.id).clear()
    assert len(cache.of(done.id)) == 4
