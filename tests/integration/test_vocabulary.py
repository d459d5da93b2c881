"""The stored vocabulary (runtime/vocabulary.py): every event class is in it, what Chronicle writes
fits it, and what does not is refused before it is written or named by `chronicle doctor`.

The whole suite runs with CHRONICLE_CHECK_EVENTS=1 (tests/conftest.py), so every event any test
writes is held to the vocabulary; these tests pin the parts that a quiet vocabulary would not show:
that it covers every class, and that a misfit is actually caught, on both backends."""

from __future__ import annotations

import importlib
import pkgutil
from datetime import datetime, timezone
from uuid import uuid4

import pytest
from eventsourcing.domain import Aggregate, DomainEvent, Snapshot
from eventsourcing.utils import get_topic

import chronicle.domain as domain
from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.turn import Turn
from chronicle.runtime.guardrails import mark
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.stored_vocabulary import MisfitEvent, misfit, stored_vocabulary
from tests.helpers import cli, json_lines

NOW = datetime(2026, 3, 1, tzinfo=timezone.utc)


def aggregate_events() -> set[str]:
    """The topic of every event class the domain's aggregates declare (their own namespaces)."""
    for info in pkgutil.iter_modules(domain.__path__):
        importlib.import_module(f"chronicle.domain.{info.name}")
    topics, todo = set(), list(Aggregate.__subclasses__())
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if not cls.__module__.startswith("chronicle.domain."):
            continue
        for value in vars(cls).values():
            if isinstance(value, type) and issubclass(value, DomainEvent) and not issubclass(value, Snapshot):
                topics.add(get_topic(value))
    return topics


def test_every_event_class_of_every_aggregate_and_index_log_is_in_the_vocabulary():
    known = set(stored_vocabulary().classes)
    declared = aggregate_events()
    assert len(declared) > 60
    assert declared - known == set()
    assert {"chronicle.runtime.store:SessionLogged", "chronicle.runtime.jobs:JobLogged",
            "chronicle.runtime.self_repair:RepairLogged"} <= known


def _turn(store: ChronicleStore) -> Turn:
    session, _ = start_session(store, AgentSpec(name="main"), "hello")
    turn = Turn(id=uuid4(), session_id=session.id, input_id="i", number=1, input_text="hello", agent="main", timestamp=NOW)
    turn.start(NOW)
    store.save(turn)
    return turn


def test_an_event_that_does_not_fit_is_refused_before_anything_is_written(db_url):
    store = ChronicleStore(db_url)
    turn = _turn(store)
    turn.record_guardrail({"where": "final", "guardrail": "g"}, None, NOW)  # no action, no digests
    before = store.max_position()
    with pytest.raises(MisfitEvent, match=r"Turn.GuardrailApplied v3: mark.action: Field required"):
        store.save(turn)
    assert store.max_position() == before


def test_doctor_names_a_stored_event_that_does_not_fit_and_passes_one_that_does(db_url):
    store = ChronicleStore(db_url)
    turn = _turn(store)
    turn.record_guardrail(mark("g", "final", "before", "after"), "after", NOW)
    store.save(turn)
    assert cli("doctor", db=db_url).returncode == 0

    turn.record_retry(attempt=1, reason="overloaded: try later", delay_s="soon", now=NOW)  # type: ignore[arg-type]
    store.check_events = False  # as an older build with a bug, or an edit of the database, would write it
    store.save(turn)
    position = store.max_position()
    for delay in ("later", "much later"):  # the same problem again: counted, not listed
        turn.record_retry(attempt=2, reason="overloaded: try later", delay_s=delay, now=NOW)  # type: ignore[arg-type]
        store.save(turn)
    turn.record_guardrail({"where": "final", "guardrail": "g", "action": "modified"}, None, NOW)  # another problem
    store.save(turn)

    check = cli("doctor", "--json", db=db_url)
    assert check.returncode == 1
    first, other = json_lines(check.stdout)
    assert first["check"] == "misfit_event" and first["position"] == position
    assert first["aggregate_id"] == str(turn.id) and first["similar"] == 2
    assert "Turn.ModelCallRetried version 4 does not fit its declared fields: delay_s:" in first["detail"]
    assert "'soon'" in first["detail"]
    assert other["position"] == position + 3 and other["similar"] == 0
    assert other["detail"] == (f"chronicle.domain.turn:Turn.GuardrailApplied version {turn.version} does not fit its declared "
                               "fields: mark.before_sha256: Field required")
    shown = cli("doctor", db=db_url)
    assert shown.returncode == 1
    assert f"misfit_event: position {position}:" in shown.stdout and "(and 2 later events like it)" in shown.stdout
    assert "upcaster" in shown.stdout


def test_the_check_is_strict_about_types_and_keys_but_lets_the_provider_add_fields():
    topic = get_topic(Turn.ModelResponded)
    good = Turn.ModelResponded(
        originator_id=uuid4(), originator_version=3, timestamp=NOW, step=0, fingerprint="f", latency_ms=1.0, attempts=1,
        response={"content": [{"type": "text", "text": "hi", "citations": None}, {"type": "server_tool_use", "id": "s"}],
                  "stop_reason": "end_turn", "usage": {"input_tokens": 3, "server_tool_use": {"web_search_requests": 1}}},
        request_delta={"model": "m", "max_tokens": 10, "message_count": 1},
    )
    assert misfit(topic, good) is None
    for change, complaint in [
        ({"step": "0"}, "step: Input should be a valid integer"),
        ({"response": {**good.response, "usage": {"input_tokens": "3"}}}, "response.usage.input_tokens"),
        ({"response": {**good.response, "thoughts": []}}, "response.thoughts: Extra inputs are not permitted"),
        ({"request_delta": {"system_hash": "x"}}, "request_delta.system_hash: Extra inputs are not permitted"),
        ({"response": {"content": [{"text": "no type"}], "stop_reason": "end_turn"}}, "response.content.0.type: Field required"),
        ({"attempts": True}, "attempts: Input should be a valid integer"),
    ]:
        found = misfit(topic, type(good)(**{**good.__dict__, **change}))
        assert found is not None and complaint in found.detail, (change, found)
    assert misfit("someone.elses:Order.Created", object()) is None  # not ours to hold to a vocabulary
