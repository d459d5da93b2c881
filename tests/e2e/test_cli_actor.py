"""Who decided: approvals, resumes, undo/redo, steering and cancels record the actor, and audit shows it."""

from __future__ import annotations

from tests.helpers import cli, json_lines, response, text, tool_use, write_script

ALICE = {"CHRONICLE_ACTOR": "alice@audit-host"}


def test_each_decision_records_who_made_it_and_how(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(tool_use("tu_1", "bash", command="echo hi")), response(text("done"))])
    provider = f"scripted:{script}"
    paused = cli("run", "shell please", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url, env=ALICE)
    assert paused.returncode == 3, paused.stderr
    session = json_lines(paused.stdout)[0]["session_id"]
    assert cli("approve", session, db=db_url, env={"CHRONICLE_ACTOR": "bob@desk"}).returncode == 0
    assert cli("resume", session, "--provider", provider, "--workspace", str(workspace), db=db_url, env=ALICE).returncode == 0
    assert cli("undo", session, db=db_url, env={"CHRONICLE_ACTOR": "carol@ops"}).returncode == 0
    assert cli("redo", session, db=db_url, env=ALICE).returncode == 0
    script2 = write_script(tmp_path / "s2.json", [response(tool_use("tu_2", "bash", command="echo again")), response(text("ok"))])
    yes = cli("run", "again", "--session", session, "--provider", f"scripted:{script2}", "--workspace", str(workspace), "--yes",
              db=db_url, env={"CHRONICLE_ACTOR": "ci@runner"})
    assert yes.returncode == 0, yes.stderr

    audit = json_lines(cli("audit", "--session", session, "--json", db=db_url).stdout)
    approvals = [(e["detail"]["actor"], e["detail"]["by"]) for e in audit if e["kind"] == "approval"]
    assert approvals == [("bob@desk", "user"), ("ci@runner", "--yes")]
    assert [e["detail"]["actor"] for e in audit if e["kind"] in ("undo", "redo")] == ["carol@ops", "alice@audit-host"]
    assert [e["detail"]["actor"] for e in audit if e["kind"] == "resume"] == ["alice@audit-host"]
    human = cli("audit", "--session", session, db=db_url).stdout
    assert "by bob@desk" in human and "by ci@runner (--yes)" in human


def test_steering_and_a_cancel_request_record_their_actor(sqlite_url, workspace, tmp_path):
    from chronicle.runtime.controls import request_cancel, steer
    from chronicle.runtime.store import ChronicleStore

    script = write_script(tmp_path / "s.json", [response(tool_use("tu_1", "bash", command="echo hi")), response(text("done"))])
    paused = cli("run", "shell please", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    session = json_lines(paused.stdout)[0]["session_id"]
    store = ChronicleStore(sqlite_url)
    sid = store.resolve_session_id(session)
    steer(store, sid, "look at the README first", actor="api:token-7")
    request_cancel(store, sid, "stop", actor="api:token-8")
    audit = json_lines(cli("audit", "--session", session, "--json", db=sqlite_url).stdout)
    by_kind = {e["kind"]: e["detail"] for e in audit}
    assert by_kind["steering_queued"]["actor"] == "api:token-7"
    assert by_kind["cancel_requested"]["actor"] == "api:token-8"
