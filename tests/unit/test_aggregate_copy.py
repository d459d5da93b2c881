"""The store's copy of a cached aggregate: independent wherever a command could change it.

`copy_aggregate` replaces `copy.deepcopy` for aggregates handed out by the store; a change to
the copy must never reach the cache (a failed save would otherwise leave it in memory).
"""

from __future__ import annotations

from datetime import datetime, timezone
from uuid import uuid4

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.content import TextBlock
from chronicle.domain.session import Session
from chronicle.runtime.aggregate_copy import copy_aggregate
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Holder:
    def __init__(self) -> None:
        shared = [1, {"a": [2]}]
        self.first, self.second = shared, shared
        self.block = TextBlock(text="hi")
        self.ids = (uuid4(), uuid4())
        self.mixed = ([3], "x")
        self.things = {frozenset({1}), 2}
        self.other = bytearray(b"ab")


def test_containers_are_copied_immutable_values_shared_and_aliases_kept():
    original = Holder()
    clone = copy_aggregate(original)
    assert type(clone) is Holder and clone is not original
    assert clone.first is clone.second and clone.first is not original.first  # aliasing kept, as deepcopy keeps it
    clone.first[1]["a"].append(9)
    clone.mixed[0].append(4)
    clone.things.add(5)
    clone.other.append(0)
    assert original.first == [1, {"a": [2]}] and original.mixed == ([3], "x") and original.things == {frozenset({1}), 2}
    assert original.other == bytearray(b"ab")
    assert clone.block is original.block and clone.ids is original.ids  # frozen values are shared, not rebuilt


def test_a_session_copy_changed_without_saving_leaves_the_cached_session_as_it_was(sqlite_url):
    store = ChronicleStore(sqlite_url)
    session, _ = start_session(store, AgentSpec(name="main"), "first")
    loaded = store.session(session.id)
    loaded.queue_input("x" * 32, "never saved", NOW)
    loaded.head.append(uuid4())
    again = store.session(session.id)
    assert len(again.queue) == 1 and again.head == [] and again.version == session.version
    assert isinstance(again, Session) and again.spec == session.spec
    store.update_session(session.id, lambda s: s.queue_input("y" * 32, "saved", NOW))
    assert [q["text"] for q in store.session(session.id).queue] == ["first", "saved"]
