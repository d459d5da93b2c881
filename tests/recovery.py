"""What every recovery test checks: nothing lost, nothing duplicated, nothing run twice, no orphans."""

from __future__ import annotations

import time
from collections import Counter, defaultdict
from typing import Any, Callable
from uuid import UUID

from chronicle.domain.context import build_context
from chronicle.runtime.app import queries
from chronicle.runtime.store import ChronicleStore

#: Seconds between two looks when the caller names no interval: the first looks come quickly, then they space out
#: to at most `SLOWEST_LOOK_S`. A look is often a query or an HTTP request, and at a fixed 5 ms the waits of three
#: workers took CPU from the processes they waited for (2 cores; py-spy over the suite).
FIRST_LOOK_S, SLOWEST_LOOK_S = 0.005, 0.05


def wait_for(predicate: Callable[[], Any], timeout: float = 20.0, interval: float | None = None) -> Any:
    """The predicate's first true value, looked for until `timeout`. A test that must catch a passing state names
    its `interval`, and every look comes that soon after the last."""
    deadline = time.monotonic() + timeout
    pause = interval or FIRST_LOOK_S
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(pause)
        if interval is None:
            pause = min(pause * 1.5, SLOWEST_LOOK_S)
    raise AssertionError(f"condition not met within {timeout} s")


def assert_log_is_whole(store: ChronicleStore, session_id: UUID) -> list[dict[str, Any]]:
    """Positions unique and rising; every aggregate's versions run 1..n with no gap or repeat."""
    entries = queries.log(store, session_id)
    positions = [e["position"] for e in entries]
    assert positions == sorted(set(positions)), "positions repeat or go backwards"
    versions: dict[str, list[int]] = defaultdict(list)
    for e in entries:
        versions[e["aggregate_id"]].append(e["version"])
    for aggregate_id, seen in versions.items():
        assert seen == list(range(1, len(seen) + 1)), f"{aggregate_id}: versions {seen} are not contiguous"
    return entries


def assert_no_tool_ran_twice(entries: list[dict[str, Any]]) -> None:
    """A tool that is neither idempotent nor read-only is started at most once."""
    flags = {e["aggregate_id"]: e["data"].get("flags", {}) for e in entries if e["aggregate"] == "tool_call" and e["event"] == "Requested"}
    starts = Counter(e["aggregate_id"] for e in entries if e["aggregate"] == "tool_call" and e["event"] == "Started")
    for call_id, count in starts.items():
        if not (flags[call_id].get("idempotent") or flags[call_id].get("read_only")):
            assert count <= 1, f"tool call {call_id} started {count} times"


def assert_every_tool_use_answered_once(store: ChronicleStore, session_id: UUID) -> None:
    messages = [m.wire() for m in build_context(store.head_turns(store.session(session_id)))]
    for index, message in enumerate(messages):
        uses = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        if not uses:
            continue
        assert index + 1 < len(messages), f"tool uses {uses} have no answer"
        answers = [b["tool_use_id"] for b in messages[index + 1]["content"] if b["type"] == "tool_result"]
        assert answers == uses, f"tool uses {uses} answered by {answers}"
    all_results = Counter(b["tool_use_id"] for m in messages for b in m["content"] if b["type"] == "tool_result")
    assert all(n == 1 for n in all_results.values()), f"duplicate tool results: {all_results}"


def assert_recovered(store: ChronicleStore, session_id: UUID, turns: int = 1) -> list[dict[str, Any]]:
    session = store.session(session_id)
    assert session.status == "idle" and not session.queue, f"session left {session.status} with {len(session.queue)} queued"
    assert [store.turn(t).status for t in session.turns] == ["completed"] * turns
    entries = assert_log_is_whole(store, session_id)
    assert_no_tool_ran_twice(entries)
    assert_every_tool_use_answered_once(store, session_id)
    return entries
