"""Who sent a channel's input, and what became of its reply: given a session, expect events; and the
receiver's address as it may be recorded."""

from __future__ import annotations

from datetime import datetime, timezone
from uuid import uuid4

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.errors import DomainError
from chronicle.domain.session import Session
from chronicle.runtime.server.outbox import safe_receiver
from chronicle.runtime.server.routing import sender_session_id
from chronicle.runtime.sessions import queue_scanned

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)
ORIGIN = {"channel": "signal", "senders": ["+15551234567"], "reply": True}


def test_a_channel_input_records_its_origin_and_the_session_remembers_it_past_the_turn():
    session = Session.start(uuid4(), AgentSpec(), NOW)
    session.queue_input("i1", "hello", NOW, origin=ORIGIN)
    session.queue_input("i2", "from the terminal", NOW)
    queued = [e for e in session.collect_events() if type(e).__name__ == "InputQueued"]
    assert [e.origin for e in queued] == [ORIGIN, None]
    session.start_turn(uuid4(), NOW)
    assert session.input_origins == {"i1": ORIGIN}


def test_an_origin_names_its_channel_and_a_sender():
    session = Session.start(uuid4(), AgentSpec(), NOW)
    with pytest.raises(DomainError):
        session.queue_input("i1", "hello", NOW, origin={"channel": "signal", "senders": [], "reply": False})


def test_a_turn_reply_is_recorded_once():
    session = Session.start(uuid4(), AgentSpec(), NOW)
    turn = uuid4()
    session.record_reply(turn, "signal", ["alice"], "http://h/in", False, 3, 503, "the receiver answered HTTP 503", NOW)
    assert session.replies == {str(turn): "failed"}
    with pytest.raises(DomainError, match="recorded already"):
        session.record_reply(turn, "signal", ["alice"], "http://h/in", True, 1, 200, None, NOW)


def test_inputs_and_sessions_stored_before_channels_load_with_no_origin():
    state = {"input_id": "i", "text": "t", "kind": "prompt"}
    Session.InputQueued.upcast_v1_v2(state)
    assert state["origin"] is None
    snapshot: dict = {}
    for step in range(1, Session.class_version):
        getattr(Session, f"upcast_v{step}_v{step + 1}")(snapshot)
    assert snapshot["input_origins"] == {} and snapshot["replies"] == {}


def test_senders_are_kept_as_given_unless_they_are_a_credential():
    session = Session.start(uuid4(), AgentSpec(), NOW)
    token = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"
    senders = ["+15551234567", "alice.o'brien+alerts@example.co.uk", "Alice Smith", "group:7f3a2c1e-7b5d-4c4e-9a0b-1d2e3f4a5b6c"]
    for index, sender in enumerate([*senders, token]):
        queue_scanned(session, f"i{index}", "hi", NOW, origin={"channel": "signal", "senders": [sender], "reply": False})
    assert [session.input_origins[f"i{i}"]["senders"][0] for i in range(len(senders))] == senders
    assert session.input_origins[f"i{len(senders)}"]["senders"] == ["[REDACTED:github-token]"]


def test_the_recorded_receiver_keeps_no_secret_of_the_url():
    assert safe_receiver("https://user:pw@hooks.example.com:8443/in?token=abc&x=1#frag") == \
        "https://hooks.example.com:8443/in?token=[REDACTED]&x=[REDACTED]"
    assert safe_receiver("http://127.0.0.1:9/plain") == "http://127.0.0.1:9/plain"
    slack = safe_receiver("https://hooks.slack.com/services/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")
    assert "aB3dE5fG7hJ9kL1mN3pQ5rS7" not in slack and slack.startswith("https://hooks.slack.com/services/")


def test_a_senders_session_id_is_derived_from_channel_and_sender():
    assert sender_session_id("signal", "alice") == sender_session_id("signal", "alice")
    assert len({sender_session_id("signal", "alice"), sender_session_id("signal", "bob"),
                sender_session_id("sms", "alice"), sender_session_id("signal", "alice", 1)}) == 4


def test_a_routines_findings_are_recorded_as_a_reply_naming_the_routine_and_older_replies_name_none():
    session = Session.start(uuid4(), AgentSpec(), NOW)
    turn = uuid4()
    session.record_reply(turn, "ops", [], "http://h/in", True, 1, 200, None, NOW, routine="heartbeat")
    delivered = [e for e in session.collect_events() if type(e).__name__ == "ReplyDelivered"]
    assert delivered[0].routine == "heartbeat" and delivered[0].senders == []
    for cls in (Session.ReplyDelivered, Session.ReplyFailed):
        state = {"turn_id": str(turn), "channel": "signal"}
        cls.upcast_v1_v2(state)
        assert state["routine"] is None
