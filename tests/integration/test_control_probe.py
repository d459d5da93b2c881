"""A running loop rereads its session only when a steer or cancel may have arrived, on both backends."""

from __future__ import annotations

import time
from uuid import UUID, uuid4

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.session import Session
from chronicle.runtime.control_probes import notify_control, probe_for
from chronicle.runtime.controls import SessionControls, request_cancel, steer
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore


def running_session(store: ChronicleStore) -> tuple[Session, UUID]:
    session, _ = start_session(store, AgentSpec(), "go")
    turn_id = uuid4()
    store.update_session(session.id, lambda s: s.start_turn(turn_id, s.created_at))
    return session, turn_id


def test_the_probe_says_changed_only_after_a_control_request(db_url):
    store = ChronicleStore(db_url)
    session, turn_id = running_session(store)
    controls = SessionControls(store, session.id)
    assert controls.steering(turn_id) is None and controls.cancel_reason(turn_id) is None
    assert not controls.probe.changed()  # nothing written since the read: no query, no reread

    # Another process's store object: on SQLite the version moved, on PostgreSQL a NOTIFY came.
    other = ChronicleStore(db_url)
    steer(other, session.id, "left, not right")
    assert controls.probe.changed()
    steering = controls.steering(turn_id)
    assert steering is not None and steering.texts == ["left, not right"]

    request_cancel(other, session.id, "enough")
    assert controls.cancel_reason(turn_id) == "enough"

    # The loop's own delivery is a save in this process: the delivered steering is not seen again.
    store.update_session(session.id, lambda s: s.deliver_steering(steering.steer_ids, turn_id, 0, s.created_at))
    assert controls.steering(turn_id) is None
    controls.close()
    other.close()
    store.close()


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_on_postgresql_a_notification_from_elsewhere_is_enough(db_url):
    pg_url = db_url
    store = ChronicleStore(pg_url)
    session, _ = running_session(store)
    probe = probe_for(store, session.id)
    assert type(probe).__name__ == "NotifyProbe"
    probe.mark()
    assert not probe.changed()
    notify_control(ChronicleStore(pg_url), session.id)
    # Delivery is asynchronous (it reaches the listener's socket just after the commit).
    deadline = time.monotonic() + 5
    while not probe.changed() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert probe.changed()
    probe.close()
    store.close()


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_on_postgresql_the_running_turns_of_one_store_share_one_listener_that_closes_with_the_last(db_url):
    store = ChronicleStore(db_url)
    first, _ = running_session(store)
    second, _ = running_session(store)
    one, two = probe_for(store, first.id), probe_for(store, second.id)
    assert one.listener is two.listener  # one LISTEN connection, not one per running turn
    connection = one.listener.conn
    one.mark()
    two.mark()
    notify_control(ChronicleStore(db_url), second.id)
    deadline = time.monotonic() + 5
    while not two.changed() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert two.changed() and not one.changed()  # a notification names its session only
    one.close()
    assert not connection.closed
    two.close()
    assert connection.closed and "_control_listener" not in store.__dict__
    store.close()


def test_latest_version_is_the_newest_stored_version_read_without_decoding(db_url):
    """The probe's lookup: the session's newest version as stored by any writer, 0 for an unknown id."""
    store = ChronicleStore(db_url)
    session, _ = running_session(store)
    assert store.latest_version(session.id) == store.session(session.id).version
    steer(ChronicleStore(db_url), session.id, "one more thing")
    assert store.latest_version(session.id) == store.session(session.id).version == session.version + 2
    assert store.latest_version(uuid4()) == 0
    store.close()


def _open_handles(path: str) -> int:
    import os

    fds = os.listdir("/proc/self/fd")
    return sum(1 for fd in fds if os.path.realpath(f"/proc/self/fd/{fd}") == path)


def test_the_sqlite_lookup_sees_every_writer_at_once_and_closes_with_the_store(sqlite_url, tmp_path):
    """SQLite asks on a connection kept for the question: it must see each commit of any other
    connection the moment it is made, and go when the store does."""
    store = ChronicleStore(sqlite_url)
    session, _ = running_session(store)
    other = ChronicleStore(sqlite_url)
    for text in ("one", "two", "three"):
        steer(other, session.id, text)
        assert store.latest_version(session.id) == other.session(session.id).version
    other.close()  # SQLite keeps a closed connection's file open while another one of the process holds locks on it
    assert _open_handles(str(tmp_path / "chronicle.db")) >= 2  # the pool's connection and the lookup's
    store.close()
    assert _open_handles(str(tmp_path / "chronicle.db")) == 0


def test_an_in_memory_store_answers_the_probe_through_its_own_database():
    """eventsourcing's in-memory SQLite (given in `env`) is one database per connection unless
    shared: the probe must ask the store's own, which holds the session."""
    store = ChronicleStore("sqlite:///unused-probe.db", env={"SQLITE_DBNAME": ":memory:"})
    session, turn_id = running_session(store)
    assert store.latest_version(session.id) == store.session(session.id).version > 0
    steer(store, session.id, "and then")
    assert store.latest_version(session.id) == store.session(session.id).version
    store.close()


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_on_postgresql_a_lost_listener_falls_back_to_lookups_and_is_opened_again(db_url, monkeypatch):
    """The server ends the LISTEN connection (pg_terminate_backend): the probe raised psycopg's error, which failed the
    running turn for good. It now looks the version up while the connection is gone, opens it again after
    RECONNECT_S, and a reconnection counts as a change (what was notified meanwhile went unheard)."""
    import psycopg

    from chronicle.runtime import control_probes

    monkeypatch.setattr(control_probes, "RECONNECT_S", 60.0)  # opened again when the test says (`retry_at`)
    monkeypatch.setattr(control_probes, "RECONNECT_MAX_S", 60.0)
    store = ChronicleStore(db_url)
    session, turn_id = running_session(store)
    controls = SessionControls(store, session.id, probe=probe_for(store, session.id))
    assert controls.cancel_reason(turn_id) is None and not controls.probe.changed()
    listener = controls.probe.listener
    with psycopg.connect(db_url.split("?")[0], autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (listener.conn.info.backend_pid,))
    deadline = time.monotonic() + 5
    while listener.conn is not None and time.monotonic() < deadline:  # the termination reaches the listener's socket
        assert not controls.probe.changed()  # the loss is noticed, not raised; nothing was written
        time.sleep(0.01)
    assert listener.conn is None
    assert not controls.probe.changed()
    request_cancel(ChronicleStore(db_url), session.id, "enough")  # its NOTIFY goes unheard
    assert controls.probe.changed()  # the version moved
    assert controls.cancel_reason(turn_id) == "enough"

    assert controls.probe.listener.retry_at > time.monotonic() + 30  # not tried again at once: no busy loop
    listener.retry_at = 0.0  # its time has come
    assert controls.probe.changed()  # opened again: what went unheard meanwhile is read for
    assert listener.conn is not None and not listener.conn.closed
    controls.session()
    assert not controls.probe.changed()
    steer(ChronicleStore(db_url), session.id, "heard again")
    deadline = time.monotonic() + 5
    while not controls.probe.changed() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert controls.steering(turn_id) is not None
    controls.close()
    store.close()
