"""The RoutineRun lifecycle and routine tables as chronicle.toml gives them."""

from __future__ import annotations

from datetime import UTC, datetime
from uuid import uuid4

import pytest

from chronicle.domain.errors import IllegalTransition
from chronicle.domain.routine_run import RoutineRun
from chronicle.runtime.routines import RoutineError, parse_routine

NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def fired() -> RoutineRun:
    return RoutineRun(id=uuid4(), routine="r", scope="/w", trigger="manual", due="manual/1", action="job", holder="h",
                      session_id=uuid4(), input_id="i", timestamp=NOW)


def test_a_run_ends_once_completed_failed_or_skipped():
    run = fired()
    run.complete("ok", 0.25, NOW)
    assert [type(e).__qualname__ for e in run.collect_events()] == ["RoutineRun.Fired", "RoutineRun.Completed"]
    with pytest.raises(IllegalTransition):
        run.fail("late", 0.0, NOW)
    skipped = fired()
    skipped.skip("cooldown", NOW)
    assert (skipped.status, skipped.reason, skipped.finished) == ("skipped", "cooldown", True)


def test_a_heartbeat_defaults_to_every_30_minutes_and_cron_slots_are_computed_from_the_expression():
    beat = parse_routine("heartbeat", {"heartbeat": True}, "chronicle.toml")
    assert beat.trigger == "cron:*/30 * * * *" and beat.action == "lightweight"
    assert beat.next_due(NOW).isoformat() == "2026-03-02T09:30:00+00:00"
    assert beat.current_slot(NOW) == NOW
    assert beat.current_slot(NOW.replace(minute=29)) == NOW


@pytest.mark.parametrize("table, message", [
    ({"trigger": "hourly", "prompt": "p"}, 'trigger must be "cron:EXPR"'),
    ({"trigger": "manual"}, "prompt is required"),
    ({"trigger": "manual", "prompt": "p", "action": "batch"}, "action must be lightweight or job"),
    ({"trigger": "manual", "prompt": "p", "cooldown_s": -1}, "cooldown_s must be a non-negative number"),
    ({"trigger": "manual", "prompt": "p", "every": 5}, "unknown key(s) every"),
])
def test_a_bad_routine_table_names_the_key(table, message):
    with pytest.raises(RoutineError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_routine("r", table, "chronicle.toml")


def test_a_routine_may_name_the_channel_its_findings_go_to_and_a_run_records_it_when_it_fires():
    routine = parse_routine("heartbeat", {"heartbeat": True, "notify": " ops "}, "chronicle.toml")
    assert routine.notify == "ops" and routine.row(NOW)["notify"] == "ops"
    assert parse_routine("r", {"trigger": "manual", "prompt": "p"}, "chronicle.toml").notify is None
    with pytest.raises(RoutineError, match="routines.r: notify must name a"):
        parse_routine("r", {"trigger": "manual", "prompt": "p", "notify": ""}, "chronicle.toml")
    run = RoutineRun(id=uuid4(), routine="r", scope="/w", trigger="manual", due="manual/1", action="job", holder="h",
                     session_id=uuid4(), input_id="i", timestamp=NOW, notify="ops")
    assert run.notify == "ops" and run.collect_events()[0].notify == "ops"
    assert fired().notify is None


def test_runs_fired_before_routines_could_notify_load_with_no_channel():
    state = {"routine": "r", "scope": "/w"}
    RoutineRun.Fired.upcast_v1_v2(state)
    assert state["notify"] is None
