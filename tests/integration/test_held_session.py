"""update_session's `held` copy: saved as it is when nothing was written since, never at the
cost of another writer's events or of changes the holder never meant to save."""

from __future__ import annotations

from datetime import datetime, timezone

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.errors import DomainError
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore
from tests.closed_at_end import closed_at_end

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc)


def _session(db_url: str) -> tuple[ChronicleStore, object]:
    store = closed_at_end(ChronicleStore(db_url))
    session, _ = start_session(store, AgentSpec(name="main"), "first")
    return store, session.id


def test_a_held_copy_nobody_wrote_past_is_the_one_saved(db_url):
    store, sid = _session(db_url)
    held = store.session(sid)
    saved = store.update_session(sid, lambda s: s.set_title("kept", NOW), held=held)
    assert saved is held
    assert closed_at_end(ChronicleStore(db_url)).session(sid).title == "kept"


def test_a_stale_held_copy_is_retried_on_a_fresh_one_and_loses_no_write(db_url):
    store, sid = _session(db_url)
    held = store.session(sid)
    other = closed_at_end(ChronicleStore(db_url))  # another process, writing after `held` was read
    other.update_session(sid, lambda s: s.queue_input("in-2", "second", NOW))
    saved = store.update_session(sid, lambda s: s.set_title("kept", NOW), held=held)
    assert saved is not held
    stored = closed_at_end(ChronicleStore(db_url)).session(sid)
    assert stored.title == "kept"
    assert [item["text"] for item in stored.queue] == ["first", "second"]


def test_a_command_the_stale_copy_refuses_is_asked_of_a_fresh_one(db_url):
    store, sid = _session(db_url)
    held = store.session(sid)
    closed_at_end(ChronicleStore(db_url)).update_session(sid, lambda s: s.queue_input("in-2", "second", NOW))

    def title_once_two_are_queued(session):
        if len(session.queue) < 2:
            raise DomainError("only one input is queued")
        session.set_title("two queued", NOW)

    saved = store.update_session(sid, title_once_two_are_queued, held=held)
    assert saved.title == "two queued"
    assert closed_at_end(ChronicleStore(db_url)).session(sid).title == "two queued"


def test_a_held_copy_with_unsaved_changes_is_not_what_gets_saved(db_url):
    store, sid = _session(db_url)
    held = store.session(sid)
    held.set_title("never meant to be saved", NOW)  # changed, not saved
    saved = store.update_session(sid, lambda s: s.queue_input("in-2", "second", NOW), held=held)
    assert saved is not held
    stored = closed_at_end(ChronicleStore(db_url)).session(sid)
    assert stored.title is None
    assert [item["text"] for item in stored.queue] == ["first", "second"]
