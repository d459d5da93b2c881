"""`cancel` from one process while a worker ends turn after turn in another: a turn may end between
cancel's look at the session and its request. Cancel promises exit 0 also when nothing runs, so the
turn that ended meanwhile is "nothing running", never a DomainError (an internal error at the CLI).
A storm of processes steering and cancelling one session found it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.app import approvals, controls
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
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
    worker = subprocess.Popen([sys.executable, "-m", "chronicle.runtime.cli", "worker", "--poll", "0.05", "--idle-exit", "1"],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    answers = []
    try:
        while worker.poll() is None:
            answers.append(controls.cancel(store, session.id, wait_s=0).status)  # raised DomainError when a turn ended meanwhile
            # A breath between requests: back to back (≈ 1,000 a second) they starve the worker's session writes (its
            # update_session loses 20 times running and the turn fails), a separate matter from the race tested here.
            time.sleep(0.002)
    finally:
        if worker.poll() is None:
            worker.kill()
        worker.wait(timeout=30)
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
