"""Self-repair on both backends, with the clock handed in: a stuck turn handed to resume and its success,
retries exhausted into manual_required (which workers then skip), and a tool broken N runs in a row."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.ids import turn_id
from chronicle.domain.turn import Turn
from chronicle.runtime.loop import AgentLoop, LoopOptions
from chronicle.runtime.providers.scripted import ScriptedProvider
from chronicle.runtime.self_repair import SelfRepair, repair_row
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.toolsets import toolbox_for
from tests.fixed_clock import Clock
from tests.helpers import cli, json_lines, response, text, tool_use
from tests.integration.loop_harness import Harness

T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


def stuck_turn(store: ChronicleStore, workspace, at: datetime) -> Turn:
    """A turn started by a process that then died: running, and nothing recorded since."""
    session, input_id = start_session(store, AgentSpec(name="main", model="scripted", workspace=str(workspace)), "hello",
                                      clock=Clock(at))
    tid = turn_id(session.id, input_id or "")
    turn = Turn(id=tid, session_id=session.id, input_id=input_id, number=1, input_text="hello", agent="main", timestamp=at)
    turn.start(at)
    store.update_session(session.id, lambda s: s.start_turn(tid, at), turn)
    return turn


def test_a_stuck_turn_is_handed_to_resume_and_the_repair_records_success_when_it_moves(db_url, workspace, tmp_path):
    store = ChronicleStore(db_url)
    turn = stuck_turn(store, workspace, T0)
    clock = Clock(T0 + timedelta(minutes=5))
    monitor = SelfRepair(store, clock=clock, stuck_after_s=600)
    assert monitor.check_turns() == [], "five minutes of silence is under the threshold"
    clock.at = T0 + timedelta(minutes=11)
    [repair] = monitor.check_turns()
    assert (repair.kind, repair.status, repair.attempts[-1]["result"]) == ("stuck_turn", "retrying", "retry")
    assert store.turn(turn.id).status == "interrupted"
    assert monitor.check_turns() == [], "an interrupted turn waits for resume; it is not stuck again"
    [row] = json_lines(cli("sessions", "--json", db=db_url).stdout)
    assert (row["status"], row["repair"]) == ("interrupted", "retrying"), "sessions shows the repair under way"

    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [response(text("hi again"))]}}), encoding="utf-8")
    loop = AgentLoop(store, ScriptedProvider(script), toolbox_for(()), workspace, options=LoopOptions())
    outcome = asyncio.run(loop.run_next(turn.session_id))
    assert outcome is not None and outcome.status == "completed"
    clock.at = datetime.now(UTC) + timedelta(seconds=1)
    [healed] = monitor.check_turns()
    assert [a["result"] for a in healed.attempts] == ["retry", "success"]

    audit = json_lines(cli("audit", "--session", str(turn.session_id), "--json", db=db_url).stdout)
    assert [e["status"] for e in audit if e["kind"] == "repair"] == ["detected", "retry", "success"]
    rows = json_lines(cli("repairs", "--json", db=db_url).stdout)
    assert [(r["kind"], r["status"], r["result"]) for r in rows] == [("stuck_turn", "resolved", "success")]
    assert json_lines(cli("sessions", "--json", db=db_url).stdout)[0]["repair"] == "resolved"


def test_retries_run_out_into_manual_required_and_workers_leave_that_session_alone(db_url, workspace):
    store = ChronicleStore(db_url)
    turn = stuck_turn(store, workspace, T0)
    clock = Clock(T0 + timedelta(minutes=11))
    monitor = SelfRepair(store, clock=clock, stuck_after_s=600, max_retries=1)
    assert [r.attempts[-1]["result"] for r in monitor.check_turns()] == ["retry"]
    resumed = store.turn(turn.id)  # a process resumes it, then hangs
    resumed.resume("resumed", clock.at + timedelta(seconds=1))
    store.save(resumed)
    clock.at += timedelta(seconds=2)
    assert [r.attempts[-1]["result"] for r in monitor.check_turns()] == ["success"]
    assert not monitor.blocked(turn.session_id)
    clock.at += timedelta(minutes=11)
    [gave_up] = monitor.check_turns()
    assert gave_up.status == "manual_required" and "1 retr(ies) did not help" in gave_up.attempts[-1]["detail"]
    assert store.turn(turn.id).status == "running", "nothing is done to the turn once a person has to look"
    assert monitor.blocked(turn.session_id)
    assert monitor.check_turns() == []
    assert json_lines(cli("sessions", "--json", db=db_url).stdout)[0]["repair"] == "manual_required"


def test_a_tool_failing_n_runs_in_a_row_is_reported_broken_and_its_next_success_resolves_it(db_url, workspace, tmp_path):
    missing = [tool_use(f"m{i}", "read_file", path=f"missing-{i}.txt") for i in range(3)]
    harness = Harness(db_url, workspace, tmp_path, [
        response(*missing), response(tool_use("bad", "read_file", file="wrong argument name")),
        response(tool_use("ok", "read_file", path="hello.txt")), response(text("done")),
    ], tools=("read_file",))
    assert harness.run("read things").status == "completed"
    monitor = SelfRepair(harness.store, clock=Clock(T0), tool_failures=3)
    changed = monitor.check_tools()
    assert [(r.kind, r.target, r.attempts[-1]["result"]) for r in changed] == [
        ("broken_tool", "read_file", "manual_required"), ("broken_tool", "read_file", "success"),
    ]
    row = repair_row(changed[-1])
    assert row["status"] == "resolved" and "read_file completed again" in row["detail"]
    assert "failed 3 times in a row" in changed[-1].attempts[0]["detail"], "invalid arguments are not the tool's failure"
    assert monitor.check_tools() == [], "the log is read once"


def test_a_full_pass_reads_the_calls_together_and_resolves_a_repair_an_earlier_pass_recorded(db_url, workspace, tmp_path, monkeypatch):
    """`repairs --check` reads the whole log: each batch's calls in one read (a read per call was most of its
    time), and the broken tools waiting for a person once a pass (they were every repair, at each success)."""
    missing = [tool_use(f"m{i}", "read_file", path=f"missing-{i}.txt") for i in range(3)]
    harness = Harness(db_url, workspace, tmp_path, [
        [response(*missing), response(text("could not"))],
        [response(tool_use("ok", "read_file", path="hello.txt")), response(text("done"))],
    ], tools=("read_file",))
    assert harness.run("read things").status == "completed"
    (broken,) = SelfRepair(harness.store, clock=Clock(T0), tool_failures=3).check_tools()
    assert broken.status == "manual_required"
    assert harness.run("again").status == "completed"

    cold = ChronicleStore(db_url)
    monkeypatch.setattr(cold, "find_tool_call", lambda *_: pytest.fail("a tool call was read alone"))
    monitor = SelfRepair(cold, clock=Clock(T0), tool_failures=3)
    with monkeypatch.context() as alone:  # every repair listed in one read, as each of a worker's passes lists them
        alone.setattr(monitor, "find", lambda *_: pytest.fail("a repair was read alone"))
        assert [r.id for r in monitor.repairs()] == [broken.id]
    changed = monitor.check_tools()
    assert [(r.id, r.attempts[-1]["result"]) for r in changed] == [(broken.id, "success")]
    assert [repair_row(r)["status"] for r in monitor.repairs()] == ["resolved"]
    cold.close()


def test_a_tool_broken_earlier_is_resolved_in_a_pass_that_first_finds_another_tool_broken(db_url, workspace, tmp_path):
    """The open broken tools are listed once a pass: one reported during the pass must not hide those reported
    before it from a success later in the same pass."""
    missing = [tool_use(f"m{i}", "read_file", path=f"missing-{i}.txt") for i in range(3)]
    nowhere = [tool_use(f"d{i}", "list_dir", path=f"nowhere-{i}") for i in range(3)]
    harness = Harness(db_url, workspace, tmp_path, [
        [response(*missing), response(text("could not"))],
        [response(*nowhere), response(tool_use("ok", "read_file", path="hello.txt")), response(text("done"))],
    ], tools=("read_file", "list_dir"))
    monitor = SelfRepair(harness.store, clock=Clock(T0), tool_failures=3)
    assert harness.run("read things").status == "completed"
    assert [(r.target, r.status) for r in monitor.check_tools()] == [("read_file", "manual_required")]
    assert harness.run("list, then read").status == "completed"
    assert [(r.target, r.attempts[-1]["result"]) for r in monitor.check_tools()] == [
        ("list_dir", "manual_required"), ("read_file", "success"),
    ]


def test_a_monitor_reads_every_session_once_then_only_the_sessions_whose_events_moved(db_url, workspace, monkeypatch):
    """A worker checks for stuck turns every 10 s: after its first pass it follows the Session events logged since,
    so a turn that starts later is still found stuck, one that ended is let go, and no pass reads every session."""
    store = ChronicleStore(db_url)
    clock = Clock(T0)
    monitor = SelfRepair(store, clock=clock, stuck_after_s=600)
    first = stuck_turn(store, workspace, T0)
    assert monitor.check_turns() == [] and set(monitor.in_flight or {}) == {first.session_id}
    monkeypatch.setattr(store, "sessions", lambda *_a, **_k: pytest.fail("every session was read again"))

    later = stuck_turn(store, workspace, T0 + timedelta(minutes=8))
    ended = store.turn(first.id)
    ended.complete(T0 + timedelta(minutes=9))
    store.update_session(first.session_id, lambda s: s.end_turn(first.id, T0 + timedelta(minutes=9)), ended)
    clock.at = T0 + timedelta(minutes=19)
    [repair] = monitor.check_turns()
    assert repair.target == str(later.id) and store.turn(later.id).status == "interrupted"
    assert set(monitor.in_flight or {}) == {later.session_id}
    store.close()
