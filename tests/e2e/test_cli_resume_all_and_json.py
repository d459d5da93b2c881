"""`resume --all` goes on past a session it cannot resume; `resume --json` prints only JSON."""

from __future__ import annotations

import json

from tests.helpers import cli, json_lines, response, text, tool_use, write_script


def submitted(tmp_path, workspace, db, name: str, answer: str) -> tuple[str, object]:
    script = write_script(tmp_path / f"{name}.json", [response(text(answer))])
    out = cli("submit", f"say {answer}", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["session_id"], script


def test_resume_all_continues_past_a_session_whose_script_is_gone_and_exits_2(sqlite_url, workspace, tmp_path):
    broken, script = submitted(tmp_path, workspace, sqlite_url, "broken", "never")
    good, _ = submitted(tmp_path, workspace, sqlite_url, "good", "fine")
    script.unlink()

    resumed = cli("resume", "--all", "--json", db=sqlite_url)

    assert resumed.returncode == 2, resumed.stderr
    events = json_lines(resumed.stdout)
    ends = {e["session_id"]: e for e in events if e["type"] == "agent_end"}
    assert ends[good]["status"] == "completed" and broken not in ends
    errors = [line for line in resumed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and broken in errors[0]
    sessions = {s["session_id"]: s for s in json_lines(cli("sessions", "--json", db=sqlite_url).stdout)}
    assert sessions[good]["turns"] == 1


def test_resume_json_wraps_each_session_in_agent_start_and_agent_end(sqlite_url, workspace, tmp_path):
    sid, _ = submitted(tmp_path, workspace, sqlite_url, "one", "hello")
    resumed = cli("resume", sid, "--json", db=sqlite_url)
    assert resumed.returncode == 0, resumed.stderr
    events = json_lines(resumed.stdout)
    assert events[0] == {**events[0], "type": "agent_start", "session_id": sid, "depth": 0}
    assert events[-1] == {**events[-1], "type": "agent_end", "session_id": sid, "status": "completed", "depth": 0}
    assert any(e["type"] == "turn_end" and e["text"] == "hello" for e in events)


def test_resume_json_with_nothing_to_do_prints_one_json_object(sqlite_url, workspace, tmp_path):
    sid, _ = submitted(tmp_path, workspace, sqlite_url, "one", "hello")
    assert cli("resume", sid, db=sqlite_url).returncode == 0
    again = cli("resume", sid, "--json", db=sqlite_url)
    assert again.returncode == 0, again.stderr
    [answer] = json_lines(again.stdout)
    assert answer["session_id"] == sid and answer["status"] == "nothing_to_resume" and "no turn in flight" in answer["message"]
    [everyone] = json_lines(cli("resume", "--all", "--json", db=sqlite_url).stdout)
    assert everyone["session_id"] is None and everyone["status"] == "nothing_to_resume"


def test_submit_refuses_a_setup_run_would_refuse_with_exit_2_and_records_nothing(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "ok.json", [response(text("fine"))])
    bad_toml = tmp_path / "bad-ws"
    bad_toml.mkdir()
    (bad_toml / "chronicle.toml").write_text("[limits\nbudget_usd = ", encoding="utf-8")
    attempts = [
        ("--provider", "foo", "--workspace", str(workspace)),
        ("--provider", f"scripted:{tmp_path / 'missing.json'}", "--workspace", str(workspace)),
        ("--provider", f"scripted:{script}", "--workspace", str(bad_toml)),
    ]
    for flags in attempts:
        out = cli("submit", "do it", *flags, db=sqlite_url)
        assert out.returncode == 2, (flags, out.stdout, out.stderr)
        assert len(out.stderr.strip().splitlines()) == 1 and out.stderr.startswith("error:"), out.stderr
    assert json_lines(cli("sessions", "--json", db=sqlite_url).stdout) == []


def test_resume_json_on_a_session_awaiting_approval_prints_one_json_object_and_exits_3(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(tool_use("tu_1", "bash", command="echo hi")), response(text("ok"))])
    paused = cli("run", "shell please", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert paused.returncode == 3, paused.stderr
    sid = json_lines(paused.stdout)[0]["session_id"]
    resumed = cli("resume", sid[:8], "--json", db=db_url)
    assert resumed.returncode == 3, resumed.stderr
    (obj,) = json_lines(resumed.stdout)
    assert obj["session_id"] == sid and obj["status"] == "awaiting_approval"
    assert [c["name"] for c in obj["tool_calls"]] == ["bash"] and "chronicle approve" in obj["message"]


def test_resume_all_names_sessions_that_wait_for_approval_instead_of_calling_the_store_idle(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(tool_use("tu_1", "bash", command="echo hi")), response(text("ok"))])
    paused = cli("run", "shell please", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert paused.returncode == 3, paused.stderr
    sid = json_lines(paused.stdout)[0]["session_id"]
    told = cli("resume", "--all", db=db_url)
    assert told.returncode == 3, told.stderr
    assert "nothing to resume" not in told.stdout + told.stderr and f"session {sid} awaits approval of bash" in told.stderr
    (obj,) = json_lines(cli("resume", "--all", "--json", db=db_url).stdout)
    assert (obj["session_id"], obj["status"], obj["tool_calls"][0]["name"]) == (sid, "awaiting_approval", "bash")
    assert cli("approve", sid, db=db_url).returncode == 0
    done = cli("resume", "--all", db=db_url)
    assert done.returncode == 0 and "ok" in done.stdout, done.stderr
