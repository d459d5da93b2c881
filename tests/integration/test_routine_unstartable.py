"""A worker's routine engine with no model provider (none given, no ANTHROPIC_API_KEY) records a firing that would
start a session as skipped, saying why, and starts no session: one started would wait for good, and every
`resume --all` fail on it. A lightweight routine whose session exists still gets its input (that session recorded
its provider). Both backends, the clock handed in."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from chronicle.runtime.app import routines as routine_cases
from chronicle.runtime.store import ChronicleStore
from tests.closed_at_end import closed_at_end
from tests.fixed_clock import Clock
from tests.helpers import response, text

START = datetime(2026, 3, 2, 9, 0, 30, tzinfo=UTC)
CRON = '[routines.tick]\ntrigger = "cron:*/5 * * * *"\nprompt = "tick"\n'


def test_a_firing_that_would_start_a_session_no_provider_can_run_is_skipped_saying_why(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(CRON, encoding="utf-8")
    store = closed_at_end(ChronicleStore(db_url))
    clock = Clock(START)
    bare = routine_cases.engine(store, workspace, None, clock=clock)
    clock.at = START + timedelta(minutes=4, seconds=40)  # the 09:05 slot is due
    [run] = bare.tick()
    assert run.status == "skipped" and run.session_id is None
    assert run.reason.startswith("its session could not run: no model provider: set ANTHROPIC_API_KEY")
    assert store.session_ids() == []
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"routine-tick": [[response(text("ok"))]]}}), encoding="utf-8")
    given = routine_cases.engine(store, workspace, f"scripted:{script}", clock=clock)
    clock.at = START + timedelta(minutes=9, seconds=40)  # 09:10
    [started] = given.tick()
    assert started.status == "fired" and started.session_id is not None
    clock.at = START + timedelta(minutes=14, seconds=40)  # 09:15: the routine's session exists, with its provider
    [queued] = bare.tick()
    assert queued.status == "fired" and queued.session_id == started.session_id
