"""The routine engine on both backends with a clock handed in: one firing per cron slot across engines,
no replay of slots due before an engine started, event triggers, cooldown, and settling from the turn."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest
from eventsourcing.persistence import IntegrityError

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.loop import AgentLoop, LoopOptions
from chronicle.runtime.providers.scripted import ScriptedProvider
from chronicle.runtime.routine_engine import FiringNotRecorded, RoutineEngine, routine_session_id
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.toolsets import toolbox_for
from tests.fixed_clock import Clock
from tests.helpers import response, text

START = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)


@pytest.fixture
def open_store(db_url):
    """Stores for the test, closed after it: one left to the collector was once finalised on its own pool's
    thread (eventsourcing's PostgresDatastore.__del__ joining that thread), a warning in whichever test ran then."""
    stores: list[ChronicleStore] = []

    def make(cls: type[ChronicleStore] = ChronicleStore) -> ChronicleStore:
        stores.append(cls(db_url))
        return stores[-1]

    yield make
    for store in stores:
        store.close()


def engine(store, workspace, clock, holder: str, provider: str = "scripted:/nowhere.json") -> RoutineEngine:
    spec = AgentSpec(name="main", provider=provider, model="scripted", workspace=str(workspace))
    return RoutineEngine.for_workspace(store, workspace, spec, holder, clock)


def test_two_engines_at_the_same_slot_fire_it_once_and_an_old_slot_is_not_replayed(open_store, workspace):
    (workspace / "chronicle.toml").write_text('[routines.tick]\ntrigger = "cron:*/5 * * * *"\nprompt = "tick"\n', encoding="utf-8")
    store = open_store()
    clock = Clock(START + timedelta(minutes=3))  # the 09:00 slot is 3.5 minutes before this engine started
    a, b = engine(store, workspace, clock, "a"), engine(store, workspace, clock, "b")
    assert a.tick() == [] and b.tick() == []
    clock.at = START + timedelta(minutes=4, seconds=40)  # 09:05:10: the 09:05 slot is due
    fired = a.tick() + b.tick()
    assert [(r.due, r.holder) for r in fired] == [("cron/2026-03-02T09:05:00+00:00", "a")]
    assert [r.status for r in b.history("tick")] == ["fired"]
    session = store.session(fired[0].session_id)
    assert session.queue[0]["kind"] == "routine" and session.spec.name == "routine-tick"


class LateLooker(RoutineEngine):
    """An engine whose first look for the run comes before the other engine's write lands: the window
    two worker processes race through, opened on purpose."""

    looked = False

    def _exists(self, aggregate_id):
        if not self.looked:
            self.looked = True
            return False
        return super()._exists(aggregate_id)


def test_an_engine_that_loses_the_race_to_queue_the_same_slot_steps_aside(open_store, workspace):
    (workspace / "chronicle.toml").write_text('[routines.tick]\ntrigger = "cron:*/5 * * * *"\nprompt = "tick"\n', encoding="utf-8")
    store = open_store()
    clock = Clock(START + timedelta(minutes=4, seconds=40))
    spec = AgentSpec(name="main", provider="scripted:/nowhere.json", model="scripted", workspace=str(workspace))
    a, late = engine(store, workspace, clock, "a"), LateLooker.for_workspace(store, workspace, spec, "late", clock)
    routine = a.routines[0]
    due = "cron/2026-03-02T09:05:00+00:00"
    assert a.fire(routine, due) is not None
    # The session exists and already queued the slot's input: the late engine must see it was fired, not fail.
    assert late.fire(routine, due) is None
    assert [r.holder for r in a.history("tick")] == ["a"]
    assert len(store.session(routine_session_id(a.scope, routine.name)).queue) == 1


def test_a_failed_turn_fires_the_event_routine_once_and_its_run_settles_from_the_turn(open_store, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(
        '[routines.on_fail]\ntrigger = "event:Turn.Failed"\nprompt = "why?"\naction = "job"\ncooldown_s = 600\n', encoding="utf-8")
    script = tmp_path / "s.json"
    fatal = {"content": [], "stop_reason": "end_turn", "usage": {"input_tokens": 0, "output_tokens": 0},
             "error": {"kind": "invalid_request_error", "message": "bad", "status": 400, "retryable": False}}
    script.write_text(json.dumps({"agents": {"main": [fatal], "routine-on_fail": [response(text("it was bad"))]}}), encoding="utf-8")
    store = open_store()
    clock = Clock(START)
    e = engine(store, workspace, clock, "w", provider=f"scripted:{script}")

    def run_session(sid) -> None:
        loop = AgentLoop(store, ScriptedProvider(script), toolbox_for(()), workspace, options=LoopOptions())
        asyncio.run(loop.run_next(sid))

    for _ in range(2):
        session, _ = start_session(store, AgentSpec(name="main", model="scripted", workspace=str(workspace)), "fail")
        run_session(session.id)
    fired = e.tick()
    assert [r.status for r in fired] == ["fired", "skipped"], "one run per failed turn; the second is held by the cooldown"
    assert fired[0].due.startswith("event/") and "Turn.Failed" in store.session(fired[0].session_id).queue[0]["text"]
    assert fired[1].reason == "cooldown: the last run was 0 s ago, cooldown_s is 600"
    assert e.tick() == [], "events already seen do not fire again"

    run_session(fired[0].session_id)
    settled = e.settle()
    assert [(r.status, r.summary) for r in settled] == [("completed", "it was bad")]
    assert e.tick() == [], "the routine's own session finishing does not trigger it"


class CollidingStore(ChronicleStore):
    """A store whose session writes all collide with another writer's while `colliding`: the contention
    `fire`'s retries ride out, made to outlast them."""

    colliding = False

    def create_session(self, session, *others):
        if self.colliding:
            raise IntegrityError("another writer took this slot")
        return super().create_session(session, *others)


def test_a_firing_that_cannot_be_recorded_is_an_error_not_a_firing_said_done(open_store, workspace):
    (workspace / "chronicle.toml").write_text('[routines.tick]\ntrigger = "cron:*/5 * * * *"\nprompt = "tick"\naction = "job"\n',
                                              encoding="utf-8")
    store = open_store(CollidingStore)
    clock = Clock(START + timedelta(minutes=4, seconds=40))
    a = engine(store, workspace, clock, "a")
    store.colliding = True
    with pytest.raises(FiringNotRecorded, match=r"routine tick: its firing for cron/2026-03-02T09:05:00\+00:00 could not be recorded"):
        a.tick()
    assert a.history("tick") == []
    store.colliding = False
    assert [r.due for r in a.tick()] == ["cron/2026-03-02T09:05:00+00:00"], "the next look fires the slot"


def test_an_event_whose_firing_could_not_be_recorded_is_fired_at_the_next_look_not_passed_by(open_store, workspace):
    (workspace / "chronicle.toml").write_text(
        '[routines.greet]\ntrigger = "event:Session.Started"\nprompt = "say hello"\naction = "job"\n', encoding="utf-8")
    store = open_store(CollidingStore)
    a = engine(store, workspace, Clock(START), "a")
    started, _ = start_session(store, AgentSpec(name="main", provider="scripted:/nowhere.json", model="scripted"), "hi")
    store.colliding = True
    with pytest.raises(FiringNotRecorded):
        a.tick()
    store.colliding = False
    fired = a.tick()
    assert len(fired) == 1 and str(started.id) in (store.session(fired[0].session_id).queue[0]["text"])
    assert a.tick() == [], "and only once"
