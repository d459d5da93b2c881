"""How `why SESSION CALL` reads CALL: a tool_use id, a call's id or a tool's name names a call exactly (its last);
only when nothing is named exactly is CALL the beginning of a call's id, which must then be unique (two: exit 2,
listing them). Turns are built through the domain here, so that a call's id is known before the calls that must
not be mistaken for it are recorded (both backends)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from uuid import uuid4

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.content import ModelResponse, TextBlock, ToolUseBlock
from chronicle.domain.ids import tool_call_id
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn
from chronicle.runtime.app.errors import AppError
from chronicle.runtime.app.why import why
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def turn_with_calls(store: ChronicleStore, sid, uses: list[tuple[str, str]], at: datetime, turn_id=None) -> Turn:
    """One completed turn whose single step calls `uses` [(tool_use id, tool name)], each call completed."""
    if turn_id is None:
        submit_input(store, sid, "go")
    session = store.session(sid)
    item = session.next_input
    tid = turn_id or uuid4()
    turn = Turn(id=tid, session_id=sid, input_id=item["input_id"], number=len(session.turns) + 1, input_text=item["text"],
                agent="main", timestamp=at)
    turn.start(at)
    blocks = [ToolUseBlock(id=use_id, name=name, input={}) for use_id, name in uses]
    step = turn.record_response(ModelResponse(content=blocks, stop_reason="tool_use"), at)
    calls = []
    for use_id, name in uses:
        call = ToolCall(id=tool_call_id(tid, step, use_id), session_id=sid, turn_id=tid, step=step, tool_use_id=use_id,
                        name=name, input={}, flags={}, timestamp=at)
        call.complete(f"{name} ran", at)
        calls.append(call)
    turn.close_step(calls, at)
    turn.record_response(ModelResponse(content=[TextBlock(text="done")], stop_reason="end_turn"), at)
    turn.complete(at)
    store.update_session(sid, lambda s: (s.start_turn(tid, at), s.end_turn(tid, at)), turn, *calls)
    return turn


def test_a_tool_named_like_the_start_of_a_newer_calls_id_is_that_tool(db_url):
    store = ChronicleStore(db_url)
    session, _ = start_session(store, AgentSpec(name="main", model="scripted"), "first")
    later = uuid4()
    newer_call = str(tool_call_id(later, 0, "tu_b"))
    named = newer_call[:8]  # a tool whose name is the start of the newer call's id
    first = turn_with_calls(store, session.id, [("tu_a", named)], T0, turn_id=None)
    submit_input(store, session.id, "second")
    turn_with_calls(store, session.id, [("tu_b", "read_file")], T0 + timedelta(minutes=1), turn_id=later)

    chain = why(store, session.id, named)
    assert (chain["turn"], chain["tool_call"]["name"]) == (1, named)  # the tool of that name, not the newer call
    assert chain["turn_id"] == str(first.id)
    assert why(store, session.id, newer_call[:12])["tool_call"]["name"] == "read_file"  # a prefix no name takes
    assert why(store, session.id, newer_call.upper())["tool_call"]["name"] == "read_file"  # a whole id, any case
    store.close()


def test_a_prefix_that_begins_two_calls_ids_is_a_usage_error_naming_both(db_url):
    store = ChronicleStore(db_url)
    session, _ = start_session(store, AgentSpec(name="main", model="scripted"), "first")
    tid = uuid4()
    # two tool_use ids whose call ids share their first four characters (found by trying, as the ids are hashes)
    ids = {}
    n = 0
    while True:
        use = f"tu_{n}"
        start = str(tool_call_id(tid, 0, use))[:4]
        if start in ids:
            pair, prefix = (ids[start], use), start
            break
        ids[start] = use
        n += 1
    turn_with_calls(store, session.id, [(pair[0], "read_file"), (pair[1], "list_dir")], T0, turn_id=tid)
    with pytest.raises(AppError) as refused:
        why(store, session.id, prefix)
    assert refused.value.code == 2 and "begins the ids of 2 tool calls" in str(refused.value)
    assert "read_file" in str(refused.value) and "list_dir" in str(refused.value)
    assert why(store, session.id, pair[1])["tool_call"]["name"] == "list_dir"  # its tool_use id names it exactly
    store.close()
