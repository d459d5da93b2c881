"""Every event class declares its version, and every version step has its upcaster."""

from __future__ import annotations

import pytest
from eventsourcing.utils import get_topic, resolve_topic

from chronicle.domain.schema import AGGREGATE_VERSIONS, AGGREGATES, EVENT_VERSIONS, declared_version, event_classes
from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn
from chronicle.domain.turn_upcasts import error_from_reason


def test_every_event_class_is_in_the_version_table_with_its_class_version():
    found = {name: cls for aggregate in AGGREGATES for name, cls in event_classes(aggregate).items()}
    assert sorted(found) == sorted(EVENT_VERSIONS), "add new event classes to domain/schema.py EVENT_VERSIONS"
    for name, cls in found.items():
        assert "class_version" in vars(cls) and cls.class_version == EVENT_VERSIONS[name], name
        for step in range(1, cls.class_version):
            assert callable(getattr(cls, f"upcast_v{step}_v{step + 1}")), f"{name} lacks upcast_v{step}_v{step + 1}"


def test_every_aggregate_that_changed_upcasts_its_snapshots():
    for aggregate in AGGREGATES:
        version = getattr(aggregate, "class_version", 1)
        assert version == AGGREGATE_VERSIONS[aggregate.__name__]
        for step in range(1, version):
            assert callable(getattr(aggregate, f"upcast_v{step}_v{step + 1}"))


def test_a_v1_turn_snapshot_gains_structured_errors_for_its_retries():
    state = {"retries": [{"step": 0, "attempt": 1, "reason": "rate_limit_error: slow down", "delay_s": 2.0}]}
    Turn.upcast_v1_v2(state)
    assert state["retries"][0]["error"] == {"kind": "rate_limit_error", "message": "slow down", "status": None, "retry_after_s": None}


def test_a_reason_without_a_kind_becomes_a_generic_error():
    assert error_from_reason("boom")["kind"] == "error" and error_from_reason("boom")["message"] == "boom"


def test_the_version_a_class_declares_in_its_body_is_the_one_the_mapper_sees():
    """`@event(Cls)` swaps in a subclass; the version written onto it must be the body's, or its upcasters never run."""
    for aggregate in AGGREGATES:
        for name, cls in event_classes(aggregate).items():
            declared = declared_version(cls)
            if declared is not None:
                assert cls.class_version == declared == EVENT_VERSIONS[name], name


#: Where each aggregate's stored topics point: the module its class (and every event class) is declared in.
STORED_MODULES = {"Session": "session", "Turn": "turn", "ToolCall": "tool_call", "SessionLease": "lease",
                  "Attachment": "attachment"}


@pytest.mark.parametrize("aggregate", AGGREGATES, ids=lambda a: a.__name__)
def test_each_aggregate_and_its_events_keep_the_topics_old_stores_name_them_by(aggregate):
    """Stored events and snapshots name their class by topic: moving an aggregate's helpers, views,
    rules and upcasters to other modules must leave every topic where the fixtures' records (and
    users' stores) look for it."""
    module = STORED_MODULES[aggregate.__name__]
    assert get_topic(aggregate) == f"chronicle.domain.{module}:{aggregate.__name__}"
    for name, cls in event_classes(aggregate).items():
        topic = f"chronicle.domain.{module}:{name}"
        assert get_topic(cls) == topic and resolve_topic(topic) is cls, name


def test_the_session_index_entries_keep_their_topics():
    """The store's index entries are stored events too: runtime/store.py keeps them when the store is split."""
    from chronicle.runtime import store

    for cls in (store.SessionLogged, store.SessionUnlisted, store.SessionForgotten):
        topic = f"chronicle.runtime.store:{cls.__name__}"
        assert get_topic(cls) == topic and resolve_topic(topic) is cls


def test_a_v1_session_snapshot_goes_through_every_upcaster_the_session_names():
    state = {"turns": ["t2"], "head": ["t1", "t2"], "forked_from": {"session_id": "s", "turn_id": "t1"}}
    for step in range(1, Session.class_version):
        getattr(Session, f"upcast_v{step}_v{step + 1}")(state)
    assert state["forked_from"] == {"session_id": "s", "turn": 1}
    assert state["archived"] is False and state["steering"] == [] and state["compaction_attempts"] == 0


def test_each_event_class_written_in_an_aggregate_is_built_once_more_at_most():
    """Written on the aggregate's own `Event`, an event class is used as it is; written on
    `Aggregate.Event` (or `Decided`, `Aggregate.Created`), eventsourcing builds it again as a
    subclass of the aggregate's `Event`: one more frozen dataclass each, which is what importing
    the domain spent its time on. `@event(Cls)` still adds its one subclass of the same name."""
    for aggregate in AGGREGATES:
        assert "Event" in vars(aggregate), aggregate.__name__
        for name, cls in event_classes(aggregate).items():
            same_name = [c for c in cls.__mro__ if c.__qualname__ == cls.__qualname__]
            assert len(same_name) <= 2, f"{name} is built {len(same_name)} times: write it on {aggregate.__name__}.Event"
            assert issubclass(same_name[-1], aggregate.Event), name


def test_an_event_subclass_that_reuses_its_class_dataclass_behaves_as_a_built_one():
    """domain/event_type.py: the `@event(Cls)` subclasses skip dataclass processing; what that
    processing would have given them must hold all the same (frozen, equal by class and values)."""
    import dataclasses
    from uuid import uuid4

    from eventsourcing.domain import DecoratedFuncCaller

    reused = [cls for aggregate in (Session, Turn, ToolCall) for cls in event_classes(aggregate).values()
              if DecoratedFuncCaller in cls.__bases__]
    assert len(reused) >= 45
    for cls in reused:
        body = cls.__bases__[1]
        assert "__init__" not in vars(cls) and dataclasses.fields(cls) == dataclasses.fields(body), cls
        values = {f.name: index for index, f in enumerate(dataclasses.fields(cls))} | {"originator_id": uuid4()}
        event, same, as_body = cls(**values), cls(**values), body(**values)
        assert event == same and hash(event) == hash(same) and event != as_body, cls
        assert repr(event) == repr(as_body) and repr(event).startswith(f"{cls.__qualname__}(originator_id=UUID("), cls
        for name in ("originator_version", "not_a_field"):
            with pytest.raises(dataclasses.FrozenInstanceError, match="cannot assign"):
                setattr(event, name, 1)
            with pytest.raises(dataclasses.FrozenInstanceError, match="cannot delete"):
                delattr(event, name)
        assert cls.__doc__.startswith(f"{cls.__name__}(self, originator_id"), cls.__doc__
