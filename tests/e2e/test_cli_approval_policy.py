"""The approval policy and the doom-loop threshold, set in chronicle.toml or by flag, recorded on the session and
applied by `run`, `resume` and a worker alike; every decision the policy makes shows in `audit` with its cause."""

from __future__ import annotations

import json
from pathlib import Path
from uuid import UUID

from chronicle.runtime.store import ChronicleStore
from tests.e2e.controls_helpers import log_of, tool_events
from tests.helpers import cli, json_lines, response, text, tool_use


def script(path: Path, main: list) -> str:
    path.write_text(json.dumps({"agents": {"main": main}}), encoding="utf-8")
    return f"scripted:{path}"


def config(workspace: Path, body: str) -> None:
    (workspace / "chronicle.toml").write_text(body, encoding="utf-8")


def run(prompt: str, provider: str, workspace: Path, db: str, *extra: str):
    return cli("run", prompt, "--provider", provider, "--workspace", str(workspace), "--json", *extra, db=db)


def recorded_spec(sid: str, db: str) -> dict:
    started = [e for e in log_of(sid, db) if e["aggregate"] == "session" and e["event"] == "Started"]
    return started[0]["data"]["spec"]


def decisions(sid: str, db: str) -> list[dict]:
    return [row for row in json_lines(cli("audit", "--session", sid, "--json", db=db).stdout) if row["kind"] == "approval"]


def test_policy_deny_denies_a_bash_call_unasked_the_model_is_told_and_audit_names_the_policy(db_url, workspace, tmp_path):
    config(workspace, '[approvals]\npolicy = "deny"\n')
    provider = script(tmp_path / "s.json", [response(tool_use("tu_1", "bash", command="echo x > out.txt")), response(text("did without"))])
    result = run("shell", provider, workspace, db_url)
    assert result.returncode == 0, result.stderr
    sid = json_lines(result.stdout)[0]["session_id"]
    assert not (workspace / "out.txt").exists()
    assert recorded_spec(sid, db_url)["approvals"] == {"policy": "deny", "require": [], "allow": [], "source": "chronicle.toml [approvals]"}
    assert tool_events(log_of(sid, db_url), "tu_1") == ["Requested", "ApprovalRequested", "Denied"]
    [decided] = decisions(sid, db_url)
    assert decided["status"] == "denied" and decided["detail"]["by"] == "policy"
    assert 'approval policy "deny" (chronicle.toml [approvals])' in decided["detail"]["reason"]
    shown = cli("audit", "--session", sid, db=db_url, env={"COLUMNS": "300"}).stdout
    assert "(policy): the approval policy \"deny\"" in shown
    ends = [e for e in json_lines(result.stdout) if e["type"] == "turn_end"]
    assert ends[-1]["status"] == "completed" and ends[-1]["text"] == "did without"
    [shown_end] = [e for e in json_lines(result.stdout) if e["type"] == "tool_end"]  # what watched the run saw
    assert shown_end["status"] == "denied" and "approval policy" in shown_end["output"]


def test_require_pauses_an_unflagged_tool_and_resume_keeps_the_recorded_policy_when_the_file_changes(db_url, workspace, tmp_path):
    config(workspace, '[approvals]\nrequire = ["write_file"]\n')
    provider = script(tmp_path / "s.json", [
        response(tool_use("tu_1", "write_file", path="new.txt", content="hello")), response(text("written")),
    ])
    paused = run("write", provider, workspace, db_url)
    assert paused.returncode == 3, paused.stderr
    sid = json_lines(paused.stdout)[0]["session_id"]
    assert not (workspace / "new.txt").exists()
    # the agent can write chronicle.toml: a policy written there later does not apply to this session
    config(workspace, '[approvals]\npolicy = "allow"\n')
    still = cli("resume", sid, "--json", db=db_url)
    assert still.returncode == 3, still.stderr
    assert not (workspace / "new.txt").exists()
    assert cli("approve", sid, db=db_url).returncode == 0
    done = cli("resume", sid, "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    assert (workspace / "new.txt").read_text() == "hello"
    assert [d["detail"]["by"] for d in decisions(sid, db_url)] == ["user"]


def test_allow_approves_bash_in_a_worker_recorded_as_the_policy_with_its_cause(db_url, workspace, tmp_path):
    config(workspace, '[approvals]\nallow = ["bash"]\n')
    provider = script(tmp_path / "s.json", [response(tool_use("tu_1", "bash", command="echo ran > out.txt")), response(text("ran"))])
    submitted = cli("submit", "shell", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert submitted.returncode == 0, submitted.stderr
    sid = json.loads(submitted.stdout)["session_id"]
    worked = cli("worker", "--once", "--poll", "0.05", db=db_url)
    assert worked.returncode == 0, worked.stderr
    assert (workspace / "out.txt").read_text().strip() == "ran"
    [decided] = decisions(sid, db_url)
    assert decided["status"] == "approved" and decided["detail"]["by"] == "policy"
    assert decided["detail"]["reason"] == "bash is in the approval policy's allow list (chronicle.toml [approvals])"
    store = ChronicleStore(db_url)
    assert store.turn(store.session(UUID(sid)).head[-1]).status == "completed"


def test_a_worker_goes_on_with_a_paused_turn_once_only_calls_the_policy_decides_are_left(db_url, workspace, tmp_path):
    """write_file waits for a person (require); bash, after it in the same step, is on the allow list. Once the person
    has answered write_file, a worker without --yes continues the turn: the policy decides bash."""
    config(workspace, '[approvals]\nrequire = ["write_file"]\nallow = ["bash"]\n')
    provider = script(tmp_path / "s.json", [
        response(tool_use("tu_1", "write_file", path="a.txt", content="a"), tool_use("tu_2", "bash", command="echo b > b.txt")),
        response(text("both")),
    ])
    paused = run("two", provider, workspace, db_url)
    assert paused.returncode == 3, paused.stderr
    sid = json_lines(paused.stdout)[0]["session_id"]
    assert cli("approve", sid, "--tool-call", "tu_1", db=db_url).returncode == 0
    worked = cli("worker", "--once", "--poll", "0.05", db=db_url)
    assert worked.returncode == 0, worked.stderr
    assert (workspace / "a.txt").read_text() == "a" and (workspace / "b.txt").read_text().strip() == "b"
    assert [(d["name"], d["detail"]["by"]) for d in decisions(sid, db_url)] == [("write_file", "user"), ("bash", "policy")]


def test_yes_still_wins_for_its_process_over_policy_deny(sqlite_url, workspace, tmp_path):
    config(workspace, '[approvals]\npolicy = "deny"\n')
    provider = script(tmp_path / "s.json", [response(tool_use("tu_1", "bash", command="echo y > y.txt")), response(text("yes"))])
    result = run("shell", provider, workspace, sqlite_url, "--yes")
    assert result.returncode == 0, result.stderr
    sid = json_lines(result.stdout)[0]["session_id"]
    assert (workspace / "y.txt").exists()
    assert [d["detail"]["by"] for d in decisions(sid, sqlite_url)] == ["--yes"]


def test_doom_loop_2_from_chronicle_toml_stops_at_the_second_identical_call_and_names_the_file(db_url, workspace, tmp_path):
    config(workspace, "[limits]\ndoom_loop = 2\n")
    provider = script(tmp_path / "s.json", [
        response(tool_use("tu_1", "read_file", path="hello.txt")), response(tool_use("tu_2", "read_file", path="hello.txt")),
        response(text("never reached")),
    ])
    result = run("loop", provider, workspace, db_url)
    assert result.returncode == 4, result.stderr
    sid = json_lines(result.stdout)[0]["session_id"]
    assert recorded_spec(sid, db_url)["limits"]["doom_loop"] == 2
    log = log_of(sid, db_url)
    assert tool_events(log, "tu_2")[-1] == "Skipped"
    [stopped] = [e for e in log if e["aggregate"] == "turn" and e["event"] == "Stopped"]
    assert stopped["data"]["guard"] == "doom_loop"
    assert "2 times in a row" in stopped["data"]["reason"] and "[limits] doom_loop in" in stopped["data"]["reason"]


def test_doom_loop_0_turns_the_guard_off(sqlite_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [
        *(response(tool_use(f"tu_{i}", "read_file", path="hello.txt")) for i in range(1, 5)), response(text("four reads")),
    ])
    result = run("loop", provider, workspace, sqlite_url, "--doom-loop", "0")
    assert result.returncode == 0, result.stderr
    sid = json_lines(result.stdout)[0]["session_id"]
    assert recorded_spec(sid, sqlite_url)["limits"]["doom_loop"] == 0


def test_resume_applies_the_doom_loop_threshold_the_session_recorded(db_url, workspace, tmp_path):
    config(workspace, "[limits]\ndoom_loop = 2\n")
    provider = script(tmp_path / "s.json", [
        response(tool_use("tu_1", "bash", command="true")),
        response(tool_use("tu_2", "read_file", path="hello.txt")), response(tool_use("tu_3", "read_file", path="hello.txt")),
        response(text("never reached")),
    ])
    paused = run("go", provider, workspace, db_url)
    assert paused.returncode == 3, paused.stderr
    sid = json_lines(paused.stdout)[0]["session_id"]
    (workspace / "chronicle.toml").unlink()  # the threshold is the session's now, not the file's
    assert cli("approve", sid, db=db_url).returncode == 0
    resumed = cli("resume", sid, "--json", db=db_url)
    assert resumed.returncode == 4, resumed.stderr
    assert "2 times in a row" in resumed.stderr and "(threshold from the session's record)" in resumed.stderr


def test_a_tool_call_limit_from_chronicle_toml_is_reported_as_the_file_s_not_as_the_flag(sqlite_url, workspace, tmp_path):
    config(workspace, "[limits]\nmax_tool_calls = 1\n")
    provider = script(tmp_path / "s.json", [
        response(tool_use("tu_1", "read_file", path="hello.txt"), tool_use("tu_2", "list_dir", path=".")), response(text("never")),
    ])
    result = run("two", provider, workspace, sqlite_url)
    assert result.returncode == 4, result.stderr
    stopped = [e for e in log_of(json_lines(result.stdout)[0]["session_id"], sqlite_url) if e["event"] == "Stopped"]
    assert "[limits] max_tool_calls in" in stopped[0]["data"]["reason"] and "--max-tool-calls" not in stopped[0]["data"]["reason"]
    flagged = run("two", provider, workspace, sqlite_url, "--max-tool-calls", "1")
    stopped = [e for e in log_of(json_lines(flagged.stdout)[0]["session_id"], sqlite_url) if e["event"] == "Stopped"]
    assert "(--max-tool-calls)" in stopped[0]["data"]["reason"]


def test_a_bad_approvals_table_or_doom_loop_exits_2_with_one_line_and_records_nothing(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [response(text("never"))])
    cases = {
        '[approvals]\npolicy = "maybe"\n': "approvals.policy: expected one of ask, deny, allow, got 'maybe'",
        '[approvals]\nallways = ["bash"]\n': "approvals.allways: unknown key; allowed: policy, require, allow",
        '[approvals]\nallow = "bash"\n': "approvals.allow: expected a list of tool names",
        '[agents.main.approvals]\npolicy = "never"\n': "agents.main.approvals.policy: expected one of",
        "[limits]\ndoom_loop = -1\n": "[limits] doom_loop: expected a number ≥ 0",
        "[limits]\ndoom_loop = 2.5\n": "[limits] doom_loop: expected a whole number",
    }
    for body, message in cases.items():
        config(workspace, body)
        result = run("hi", provider, workspace, db_url)
        assert result.returncode == 2, (body, result.stderr)
        assert message in result.stderr, (body, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    config(workspace, "")
    flag = run("hi", provider, workspace, db_url, "--doom-loop", "-1")
    assert flag.returncode == 2
    listed = cli("sessions", "--json", db=db_url)
    assert json_lines(listed.stdout) == [], "a refused run recorded a session"


def test_deny_recorded_at_submit_is_applied_by_resume_and_by_a_worker_whatever_the_file_says_later(db_url, workspace, tmp_path):
    config(workspace, '[approvals]\npolicy = "deny"\n')
    provider = script(tmp_path / "s.json", [response(tool_use("tu_1", "bash", command="echo x >> ran.txt")), response(text("denied"))])
    sids = []
    for _ in range(2):
        submitted = cli("submit", "shell", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
        assert submitted.returncode == 0, submitted.stderr
        sids.append(json.loads(submitted.stdout)["session_id"])
    config(workspace, '[approvals]\npolicy = "allow"\n')  # written after the sessions started: not theirs
    resumed = cli("resume", sids[0], "--json", db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    worked = cli("worker", "--once", "--poll", "0.05", db=db_url)
    assert worked.returncode == 0, worked.stderr
    assert not (workspace / "ran.txt").exists()
    for sid in sids:
        [decided] = decisions(sid, db_url)
        assert (decided["status"], decided["detail"]["by"]) == ("denied", "policy")
        assert 'approval policy "deny" (chronicle.toml [approvals])' in decided["detail"]["reason"]
