"""A fork's origin has one shape, {"session_id", "turn"}; chat's old {"session_id", "turn_id"} is upcast on load.

Old records are written for real: the event (or snapshot) is stored while its class still
declares the old version, exactly as an older Chronicle wrote it, and read back by a fresh store.
"""

from __future__ import annotations

from datetime import datetime, timezone
from uuid import uuid4

from eventsourcing.domain import Snapshot

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.session import Session
from chronicle.runtime.actor import process_actor
from chronicle.runtime.app import timetravel as app_timetravel
from chronicle.runtime.store import ChronicleStore
from tests.helpers import response, text

from .loop_harness import Harness

NOW = datetime(2026, 1, 5, tzinfo=timezone.utc)


def _old_fork(store: ChronicleStore, parent_id: str, head: list) -> Session:
    child = Session.start(uuid4(), AgentSpec(name="main"), NOW, forked_from={"session_id": parent_id, "turn_id": str(head[-1])},
                          head=head)
    old = Session.Started.class_version
    Session.Started.class_version = 1  # type: ignore[misc]
    store.check_events = False  # a v1 event does not fit today's vocabulary until it is upcast on load
    try:
        store.create_session(child)
    finally:
        Session.Started.class_version = old  # type: ignore[misc]
        store.check_events = True
    return child


def test_a_v1_chat_fork_event_loads_with_the_turn_number(db_url):
    store = ChronicleStore(db_url)
    head = [uuid4(), uuid4()]
    child = _old_fork(store, "p-1", head)
    fresh = ChronicleStore(db_url)
    assert fresh.session(child.id).forked_from == {"session_id": "p-1", "turn": 2}


def test_a_v2_session_snapshot_of_a_chat_fork_loads_with_the_turn_number(db_url):
    store = ChronicleStore(db_url)
    child = _old_fork(store, "p-2", [uuid4(), uuid4(), uuid4()])
    # A snapshot as the previous version took it: forked_from still in the old shape.
    old = Session.class_version
    Session.class_version = 2  # type: ignore[misc]
    try:
        loaded = store.session(child.id)
        loaded.forked_from = {"session_id": "p-2", "turn_id": "x"}
        store.snapshots.put([Snapshot.take(loaded)])  # type: ignore[union-attr]
    finally:
        Session.class_version = old  # type: ignore[misc]
    fresh = ChronicleStore(db_url)
    assert fresh.session(child.id).forked_from == {"session_id": "p-2", "turn": 3}


def test_forking_at_the_end_of_the_branch_records_the_shape_fork_records(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [[response(text("one"))], [response(text("two"))]])
    h.run("first")
    h.run("second")
    chat_fork = app_timetravel.fork(h.store, h.session_id)  # chat's /fork: no --at
    cli_fork = app_timetravel.fork(h.store, h.session_id, 2)
    assert chat_fork.forked_from == cli_fork.forked_from == {"session_id": str(h.session_id), "turn": 2, "actor": process_actor()}
    assert chat_fork.head == cli_fork.head
