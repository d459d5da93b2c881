"""Seed 001's auth mode through `import chronicle` and the CLI, on both backends: a tool asks for a credential,
the session records that it waits for one, the user's next message is the credential (no input, no turn, nothing
logged) and goes to the workspace's credential store outside the event log; undo leaves auth mode."""

from __future__ import annotations

import json
import stat
from typing import Any

from chronicle import Agent, Chronicle, ToolContext, tool
from tests import processes
from tests.helpers import cli, response, text, tool_use

SECRET = "tok-9f8e7d6c5b4a-SECRET"


def scripted(tmp_path, **agents) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": agents}), encoding="utf-8")
    return f"scripted:{path}"


@tool()
def deploy(ctx: ToolContext) -> str:
    """Deploy the site; needs the deploy token."""
    token = ctx.credential("deploy_token", "the deploy token")
    return f"deployed with a token of {len(token)} characters"


def asks_then_deploys(tmp_path) -> Agent:
    ask = [response(tool_use("d1", "deploy")), response(text("Please paste the deploy token."))]
    again = [response(tool_use("d2", "deploy")), response(text("Deployed."))]
    return Agent(tools=[deploy], provider=scripted(tmp_path, main=[ask, again]))


def events(app: Chronicle, sid: str) -> list[dict]:
    return [e for e in app.log(sid) if e["aggregate"] == "session"]


def test_the_message_after_a_credential_request_is_stored_outside_the_log_and_runs_no_turn(db_url, workspace, tmp_path):
    agent = asks_then_deploys(tmp_path)
    with Chronicle(db_url) as app:
        first = app.run_sync(agent, "deploy the site", workspace=workspace)
        sid = first.session_id
        [asked] = [e for e in events(app, sid) if e["event"] == "CredentialRequested"]
        assert (asked["data"]["name"], asked["data"]["prompt"]) == ("deploy_token", "the deploy token")
        turns_before = len([e for e in app.log(sid) if e["event"] == "TurnStarted"])

        given = app.run_sync(agent, SECRET, session=sid)
        assert given.status == "idle"  # intercepted: no turn ran
        log = app.log(sid, tree=True)
        assert len([e for e in log if e["event"] == "TurnStarted"]) == turns_before
        assert [e["data"]["name"] for e in log if e["event"] == "CredentialProvided"] == ["deploy_token"]
        assert SECRET not in json.dumps(log, default=str)
        assert SECRET not in cli("log", sid, "--json", db=db_url).stdout
        if db_url.startswith("sqlite"):
            assert SECRET.encode() not in (tmp_path / "chronicle.db").read_bytes()
        stored = workspace / ".chronicle" / "credentials.json"
        assert json.loads(stored.read_text(encoding="utf-8")) == {"deploy_token": SECRET}
        assert stat.S_IMODE(stored.stat().st_mode) == 0o600

        done = app.run_sync(agent, "try again", session=sid)
        assert done.status == "completed" and done.text == "Deployed."
        results = [e["data"] for e in app.log(sid, tree=True) if e["event"] in ("Completed", "Failed")]
        assert any(f"a token of {len(SECRET)} characters" in json.dumps(r, default=str) for r in results)
        assert any("awaiting credential 'deploy_token'" in json.dumps(r, default=str) for r in results)


def test_undo_cancels_auth_mode_so_the_next_message_is_an_ordinary_input(db_url, workspace, tmp_path):
    ask = [response(tool_use("d1", "deploy")), response(text("Please paste the deploy token."))]
    agent = Agent(tools=[deploy], provider=scripted(tmp_path, main=[ask, [response(text("hello again"))]]))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "deploy the site", workspace=workspace).session_id
        app.undo(sid)
        [cancelled] = [e for e in events(app, sid) if e["event"] == "CredentialCancelled"]
        assert cancelled["data"]["reason"] == "undo"
        after = app.run_sync(agent, "never mind, say hello", session=sid)
        assert after.status == "completed" and after.text == "hello again"
        assert "never mind, say hello" in json.dumps(app.log(sid), default=str)
        assert not (workspace / ".chronicle" / "credentials.json").exists()


def test_chronicle_run_on_a_session_in_auth_mode_stores_the_credential_and_says_so(db_url, workspace, tmp_path):
    agent = asks_then_deploys(tmp_path)
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "deploy the site", workspace=workspace).session_id
    given = cli("run", "--session", sid, SECRET, db=db_url, cwd=workspace)
    assert given.returncode == 0, given.stderr
    assert "credential 'deploy_token' stored" in given.stderr and SECRET not in given.stdout + given.stderr
    with Chronicle(db_url) as app:
        assert [e["data"]["name"] for e in events(app, sid) if e["event"] == "CredentialProvided"] == ["deploy_token"]
    assert json.loads((workspace / ".chronicle" / "credentials.json").read_text(encoding="utf-8")) == {"deploy_token": SECRET}


def test_chronicle_chat_takes_the_credential_then_goes_on_with_the_next_message(db_url, workspace, tmp_path):
    agent = asks_then_deploys(tmp_path)
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "deploy the site", workspace=workspace).session_id
    chat = cli("chat", "--session", sid, db=db_url, cwd=workspace, input=f"{SECRET}\ntry again\n/quit\n")
    assert chat.returncode == 0, chat.stderr
    assert "a tool needs the deploy token" in chat.stdout and "credential 'deploy_token' stored" in chat.stdout
    assert "Deployed." in chat.stdout and SECRET not in chat.stdout + chat.stderr
    with Chronicle(db_url) as app:
        log = app.log(sid, tree=True)
    assert [e["data"]["name"] for e in log if e["event"] == "CredentialProvided"] == ["deploy_token"]
    assert SECRET not in json.dumps(log, default=str)


def test_cancel_with_no_turn_running_leaves_auth_mode_from_the_cli_and_the_library(db_url, workspace, tmp_path):
    agent = asks_then_deploys(tmp_path)
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "deploy the site", workspace=workspace).session_id
        assert app.cancel(sid)["status"] == "auth_cancelled"
        assert app.cancel(sid)["status"] == "idle"  # nothing left to cancel
        app.run_sync(agent, "try again", session=sid)  # the tool asks again: no credential was given
        assert json.loads(cli("cancel", sid, "--json", db=db_url).stdout)["status"] == "auth_cancelled"
        assert "nothing is running" in cli("cancel", sid, db=db_url).stdout
        assert [e["data"]["reason"] for e in events(app, sid) if e["event"] == "CredentialCancelled"] == ["cancel", "cancel"]


@tool()
def leaky_deploy(ctx: ToolContext) -> str:
    """Deploy, echoing the token the careless way a real tool might."""
    return f"deployed with --token {ctx.credential('deploy_token', 'the deploy token')}"


def test_a_stored_credential_a_tool_prints_or_the_model_repeats_is_cut_from_the_log(db_url, workspace, tmp_path):
    """The credential store keeps the value out of the log only if nothing carries it back in: a tool's output
    or the model's text holding it is scanned like an environment secret, whatever [privacy] says."""
    (workspace / "chronicle.toml").write_text("[privacy]\nredact = false\n", encoding="utf-8")
    ask = [response(tool_use("d1", "leaky_deploy")), response(text("Please paste the deploy token."))]
    again = [response(tool_use("d2", "leaky_deploy")), response(text(f"Deployed; I used {SECRET}."))]
    agent = Agent(tools=[leaky_deploy], provider=scripted(tmp_path, main=[ask, again]))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "deploy the site", workspace=workspace).session_id
        app.run_sync(agent, SECRET, session=sid)
        done = app.run_sync(agent, "try again", session=sid)
        assert done.status == "completed", done.reason
        log = json.dumps(app.log(sid, tree=True), default=str) + json.dumps(app.history(sid))
        assert SECRET not in log and SECRET not in done.text
        assert "deployed with --token [REDACTED:credential]" in log
        if db_url.startswith("sqlite"):
            assert SECRET.encode() not in (tmp_path / "chronicle.db").read_bytes()


def test_steering_while_a_credential_is_awaited_leaves_auth_mode_and_is_a_message_not_the_secret(db_url, workspace, tmp_path):
    """Seed 001: any control submission cancels auth mode. Steering with no turn running queues its text as an
    input; it had left the session waiting, so the message after it was taken as the credential."""
    agent = asks_then_deploys(tmp_path)
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "deploy the site", workspace=workspace).session_id
        app.steer(sid, "use the staging environment")
        log = app.log(sid)
        assert [e["data"]["reason"] for e in log if e["event"] == "CredentialCancelled"] == ["steer"]
        assert [e["data"]["text"] for e in log if e["event"] == "InputQueued"][-1] == "use the staging environment"
        assert not (workspace / ".chronicle" / "credentials.json").exists()


def test_ctrl_c_in_chat_while_a_credential_is_awaited_leaves_auth_mode_as_a_cancel(db_url, workspace, tmp_path):
    """Seed 001: any control submission leaves auth mode, and Ctrl-C is chat's cancel. Pressed at the credential
    prompt it said only "nothing is running", and the session still took the next message as the secret."""
    import os
    import signal
    import subprocess
    import sys

    from tests.helpers import _base_env
    from tests.recovery import wait_for

    ask = [response(tool_use("d1", "deploy")), response(text("Please paste the deploy token."))]
    agent = Agent(tools=[deploy], provider=scripted(tmp_path, main=[ask, [response(text("hello again"))]]))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "deploy the site", workspace=workspace).session_id
    from pathlib import Path

    env = {**_base_env(), "CHRONICLE_DB": db_url, "PYTHONUNBUFFERED": "1"}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(Path(__file__).resolve().parents[2])) if p)  # the tool
    chat = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "chat", "--session", sid], cwd=workspace, env=env,
                           stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert chat.stdin is not None and chat.stdout is not None
    said = Said(chat)
    try:
        said.wait_for("a tool needs the deploy token")
        # At the prompt, reading the credential: a SIGINT that came while input() was still on its way to its read
        # was acted on only once the read returned, with the next line (which it then lost).
        wait_for(lambda: processes.reading_stdin(chat.pid), timeout=60, interval=0.01)
        os.kill(chat.pid, signal.SIGINT)
        said.wait_for("not given: auth mode left")  # handled before the next line arrives
        chat.stdin.write("never mind, say hello\n/quit\n")
        chat.stdin.flush()
        chat.stdin.close()
        assert chat.wait(60) == 0, chat.stderr.read() if chat.stderr else ""
    finally:
        processes.stop(chat)
    said.reader.join(10)
    out = said.text
    assert "credential 'deploy_token' not given: auth mode left" in out, out
    assert "hello again" in out and "credential 'deploy_token' stored" not in out
    with Chronicle(db_url) as app:
        log = app.log(sid)
    assert [e["data"]["reason"] for e in log if e["event"] == "CredentialCancelled"] == ["cancel"]
    assert "never mind, say hello" in [e["data"]["text"] for e in log if e["event"] == "InputQueued"]
    assert not (workspace / ".chronicle" / "credentials.json").exists()


def test_a_refused_redo_or_undo_still_leaves_auth_mode_and_says_why_it_was_refused(db_url, workspace, tmp_path):
    """An undo or redo is a control whether or not it can move the branch, as `cancel` leaves auth mode with nothing
    running: refused (nothing to redo, more turns than the branch holds) it left the session waiting for the secret."""
    agent = asks_then_deploys(tmp_path)
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "deploy the site", workspace=workspace).session_id
    redone = cli("redo", sid, db=db_url)
    assert redone.returncode == 1, redone.stderr
    assert "nothing to redo" in redone.stderr and "auth mode left: credential 'deploy_token'" in redone.stderr
    with Chronicle(db_url) as app:
        assert [e["data"]["reason"] for e in events(app, sid) if e["event"] == "CredentialCancelled"] == ["redo"]
        app.run_sync(agent, "try again", session=sid)  # the tool asks again
        try:
            app.undo(sid, turns=5)
        except Exception as exc:  # ChronicleError, exit 2: more turns than the branch holds
            assert getattr(exc, "code", None) == 2 and "auth mode left" in str(exc), exc
        else:
            raise AssertionError("undo of 5 turns on a branch of 2 was not refused")
        assert [e["data"]["reason"] for e in events(app, sid) if e["event"] == "CredentialCancelled"] == ["redo", "undo"]


def test_undo_on_an_empty_branch_in_auth_mode_leaves_auth_mode_then_reports_the_empty_branch(db_url, workspace):
    from uuid import uuid4

    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.domain.session import Session
    from chronicle.runtime.clock import SYSTEM_CLOCK
    from chronicle.runtime.store import ChronicleStore

    store = ChronicleStore(db_url)
    try:
        session = Session.start(uuid4(), AgentSpec(name="main", model="m", workspace=str(workspace)), SYSTEM_CLOCK.now())
        session.await_credential("deploy_token", "the deploy token", "", SYSTEM_CLOCK.now())
        store.save(session)
        store.index_session(session.id)
        sid = str(session.id)
    finally:
        store.close()
    undone = cli("undo", sid, db=db_url)
    assert undone.returncode == 2, undone.stderr
    assert "0 turn(s) on its branch" in undone.stderr and "auth mode left: credential 'deploy_token'" in undone.stderr
    assert len(undone.stderr.strip().splitlines()) == 1
    with Chronicle(db_url) as app:
        assert [e["data"]["reason"] for e in events(app, sid) if e["event"] == "CredentialCancelled"] == ["undo"]
    again = cli("undo", sid, db=db_url)  # out of auth mode now: only the empty branch is said
    assert again.returncode == 2 and "auth mode" not in again.stderr


class Said:
    """What a process writes to its stdout, as it writes it, prompts without a newline included."""

    def __init__(self, process: Any) -> None:
        import threading

        self.process, self.text, self.changed = process, "", threading.Condition()
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        import os

        while chunk := os.read(self.process.stdout.fileno(), 4096):
            with self.changed:
                self.text += chunk.decode(errors="replace")
                self.changed.notify_all()

    def wait_for(self, wanted: str, timeout: float = 60) -> None:
        with self.changed:
            found = self.changed.wait_for(lambda: wanted in self.text, timeout)
            assert found, f"never said {wanted!r} (exit {self.process.poll()}): {self.text!r}"
