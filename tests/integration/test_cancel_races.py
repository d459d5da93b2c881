"""`cancel` from one process while a worker ends turn after turn in another: a turn may end between
cancel's look at the session and its request. Cancel promises exit 0 also when nothing runs, so the
turn that ended meanwhile is "nothing running", never a DomainError (an internal error at the CLI).
A storm of processes steering and cancelling one session found it; it also found that cancels back to back
starved the running loop's session writes, which a cancel already pending now answers without a write."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.errors import DomainError
from chronicle.domain.session import Session
from chronicle.runtime.app import approvals, controls
from chronicle.runtime.controls import request_cancel
from chronicle.runtime.loop import AgentLoop
from chronicle.runtime.providers.scripted import ScriptedProvider
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.toolsets import toolbox_for
from tests import processes
from tests.helpers import cli, response, text, tool_use
from tests.recovery import assert_log_is_whole

INPUTS = 25


def test_cancels_racing_turns_that_end_always_answer_and_every_turn_ends(db_url, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [response(text("ok"))]}}))
    store = ChronicleStore(db_url)
    spec = AgentSpec(provider=f"scripted:{script}", model="scripted", tools=[], workspace=str(tmp_path))
    session, _ = start_session(store, spec, "input 0")
    for i in range(1, INPUTS):
        submit_input(store, session.id, f"input {i}")
    env = {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}, "CHRONICLE_DB": db_url}
    worker = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "worker", "--poll", "0.05", "--idle-exit", "1"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    answers = []
    try:
        while worker.poll() is None:
            # Back to back, with no breath between them: each used to record a request, and the worker's session
            # writes lost 20 races in a row (the turn failed); a request already pending now records nothing.
            answers.append(controls.cancel(store, session.id, wait_s=0).status)  # raised DomainError when a turn ended meanwhile
    finally:
        processes.stop(worker)
    assert worker.returncode == 0, worker.stderr.read() if worker.stderr else ""
    assert set(answers) <= {"idle", "requested", "cancelled"}, answers
    after = store.session(session.id)
    assert after.status == "idle" and not after.queue
    ended = [store.turn(t) for t in after.turns]
    assert len(ended) == INPUTS and {t.status for t in ended} <= {"completed", "cancelled"}, \
        [(t.status, t.reason, t.error) for t in ended if t.status not in ("completed", "cancelled")]
    assert_log_is_whole(store, session.id)
    assert cli("verify", "--all", db=db_url).returncode == 0
    store.close()


class ApprovedMeanwhile(ChronicleStore):
    """A store whose first write of a cancel is preceded by another process approving the paused call, between
    the cancel's reads and its write: the race of `cancel` and `approve` on a turn waiting for approval."""

    name = ChronicleStore.name  # eventsourcing names an application's tables after its class otherwise

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.given, self.raced = url, False

    def update_session(self, session_id, command, *others, **kwargs):
        if not self.raced:
            self.raced = True
            other = ChronicleStore(self.given)
            try:
                approvals.approve(other, session_id)
            finally:
                other.close()
        return super().update_session(session_id, command, *others, **kwargs)


def test_a_cancel_racing_an_approval_of_the_paused_turn_cancels_it_and_loses_nothing(db_url, workspace, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [response(tool_use("b1", "bash", command="echo hi")), response(text("no"))]}}))
    paused = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert paused.returncode == 3, paused.stderr
    store = ApprovedMeanwhile(db_url)
    [sid] = store.session_ids()
    done = controls.cancel(store, sid, wait_s=0)  # raised the store's IntegrityError: the approval moved the call on
    assert store.raced and done.status == "cancelled"
    session = store.session(sid)
    turn = store.turn(session.turns[0])
    assert turn.status == "cancelled" and session.active_turn_id is None
    [call] = store.tool_calls_of(turn)
    assert call.status == "cancelled"  # approved by the other process, then cancelled with its turn
    assert not (workspace / "hi").exists()
    assert_log_is_whole(store, sid)
    assert cli("verify", "--all", db=db_url).returncode == 0
    store.close()


class CancelledBeforeEachSave(ChronicleStore):
    """A store on which another process asks to cancel the running turn before every session write of the loop, between
    its read and its save: the storm of repeated cancel requests, without depending on timing."""

    name = ChronicleStore.name

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.other = ChronicleStore(url)
        self.asked = 0

    def save(self, *objs, **kwargs):
        for obj in objs:
            if isinstance(obj, Session) and obj.pending_events:
                try:
                    request_cancel(self.other, obj.id, "cancelled by request (storm)")
                    self.asked += 1
                except DomainError:
                    pass  # no turn running yet: nothing to cancel
        return super().save(*objs, **kwargs)

    def close(self) -> None:
        self.other.close()
        super().close()


def cancel_requests(store: ChronicleStore, session_id) -> list:
    return [e for e in store.events.get(session_id) if isinstance(e, Session.CancelRequested)]


def test_repeated_cancel_requests_record_one_and_never_starve_the_loops_writes(db_url, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [response(text("ok"))]}}))
    store = CancelledBeforeEachSave(db_url)
    session, _ = start_session(store, AgentSpec(tools=[], workspace=str(tmp_path)), "go")
    loop = AgentLoop(store, ScriptedProvider(script), toolbox_for([]), tmp_path)
    outcome = asyncio.run(loop.run_next(session.id))  # failed: "kept changing under 20 attempts", each retry lost to a request
    assert outcome.status in ("completed", "cancelled"), (outcome.status, getattr(outcome, "error", None))
    assert store.asked >= 2  # the same request came again while the first was pending
    [request] = cancel_requests(store, session.id)  # the first one is the record; the repeats said nothing new
    assert request.reason == "cancelled by request (storm)"
    after = store.session(session.id)
    assert after.status == "idle" and after.cancel_requested is None
    assert_log_is_whole(store, session.id)
    store.close()


def test_a_cancel_already_requested_answers_as_accepted_and_records_nothing_more(db_url, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [dict(response(text("ok")), until_file="never")]}}))
    store = ChronicleStore(db_url)
    session, _ = start_session(store, AgentSpec(provider=f"scripted:{script}", model="scripted", tools=[], workspace=str(tmp_path)), "go")
    loop = AgentLoop(store, ScriptedProvider(script), toolbox_for([]), tmp_path)

    async def run_and_cancel():
        running = asyncio.ensure_future(loop.run_next(session.id))
        while store.session(session.id).active_turn_id is None:
            await asyncio.sleep(0.01)
        first = controls.cancel(store, session.id, wait_s=0)
        again = controls.cancel(store, session.id, wait_s=0)
        other = controls.cancel(store, session.id, wait_s=0, reason="another reason")
        return first, again, other, await running

    first, again, other, outcome = asyncio.run(run_and_cancel())
    assert (first.status, again.status) == ("requested", "requested")
    assert not first.already_requested and again.already_requested and not other.already_requested
    assert first.row() == {"session_id": str(session.id), "turn_id": str(first.turn_id), "status": "requested"}
    assert again.row()["already_requested"] is True and again.turn_id == first.turn_id
    assert [r.reason for r in cancel_requests(store, session.id)] == [controls.CANCEL_REASON, "another reason"]
    assert outcome.status == "cancelled"
    store.close()


class NewRequestBeforeEachSave(CancelledBeforeEachSave):
    """Requests that each say something new (another reason, so each is recorded), before each of the loop's first
    `BURST` session writes: a burst of controls longer than a control's own 20 tries."""

    name = ChronicleStore.name  # set again: eventsourcing names each subclass's tables after it otherwise
    BURST = 40

    def save(self, *objs, **kwargs):
        for obj in objs:
            if isinstance(obj, Session) and obj.pending_events and self.asked < self.BURST:
                try:
                    request_cancel(self.other, obj.id, f"cancelled by request {self.asked}")
                    self.asked += 1
                except DomainError:
                    pass
        return ChronicleStore.save(self, *objs, **kwargs)


def test_a_running_turns_own_writes_outlast_a_burst_of_new_control_requests(db_url, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [response(text("ok"))]}}))
    store = NewRequestBeforeEachSave(db_url)
    session, _ = start_session(store, AgentSpec(tools=[], workspace=str(tmp_path)), "go")
    loop = AgentLoop(store, ScriptedProvider(script), toolbox_for([]), tmp_path)
    outcome = asyncio.run(loop.run_next(session.id))  # failed after 20 lost races, as a control gives up
    assert outcome.status in ("completed", "cancelled"), (outcome.status, outcome.reason)
    assert store.asked == NewRequestBeforeEachSave.BURST
    assert len(cancel_requests(store, session.id)) == NewRequestBeforeEachSave.BURST  # every new request is on the record
    assert store.session(session.id).status == "idle"
    assert_log_is_whole(store, session.id)
    store.close()
