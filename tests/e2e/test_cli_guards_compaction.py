"""Guards stop turns with exit 4; compaction shortens what the model reads and keeps the log whole."""

from __future__ import annotations

import json

from tests.e2e.controls_helpers import history_of, log_of, tool_events
from tests.helpers import cli, json_lines, response, text, tool_use


def script(path, main, summary=None):
    path.write_text(json.dumps({"agents": {"main": main}, "summary": summary or []}), encoding="utf-8")
    return f"scripted:{path}"


def run(prompt, provider, workspace, db, *extra):
    return cli("run", prompt, "--provider", provider, "--workspace", str(workspace), "--json", *extra, db=db)


def test_three_identical_tool_calls_in_a_row_stop_a_non_interactive_turn_with_exit_4(db_url, workspace, tmp_path):
    same = tool_use("tu_{}", "read_file", path="hello.txt")
    provider = script(tmp_path / "s.json", [
        response({**same, "id": f"tu_{i}"}) for i in range(1, 4)
    ] + [response(text("never reached"))])
    result = run("loop", provider, workspace, db_url)
    assert result.returncode == 4, result.stderr
    events = json_lines(result.stdout)
    errors = [e for e in events if e["type"] == "error"]
    assert errors and errors[0]["kind"] == "guard:doom_loop" and "3 times in a row" in errors[0]["message"]
    assert events[-1]["status"] == "stopped"
    log = log_of(events[0]["session_id"], db_url)
    assert tool_events(log, "tu_1")[-1] == "Completed" and tool_events(log, "tu_3")[-1] == "Skipped"
    stopped = [e for e in log if e["aggregate"] == "turn" and e["event"] == "Stopped"]
    assert stopped[0]["data"]["guard"] == "doom_loop"


def test_a_session_budget_stops_the_turn_before_the_next_model_call_with_exit_4(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [
        response(tool_use("tu_1", "read_file", path="hello.txt"), usage=(10_000, 1_000)),
        response(text("too expensive to reach")),
    ])
    result = run("spend", provider, workspace, db_url, "--model", "claude-sonnet-4-5", "--budget-usd", "0.01")
    assert result.returncode == 4, result.stderr
    assert "session budget reached" in result.stderr or any("budget" in e.get("message", "") for e in json_lines(result.stdout))
    log = log_of(json_lines(result.stdout)[0]["session_id"], db_url)
    stopped = [e for e in log if e["aggregate"] == "turn" and e["event"] == "Stopped"]
    assert stopped[0]["data"]["guard"] == "budget" and "$0.0450" in stopped[0]["data"]["reason"]
    assert len([e for e in log if e["event"] == "ModelResponded"]) == 1


def test_the_hourly_call_rate_and_the_tool_call_limit_come_from_chronicle_toml_too(sqlite_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text("[limits]\nmax_tool_calls = 1\n", encoding="utf-8")
    provider = script(tmp_path / "s.json", [
        response(tool_use("tu_1", "read_file", path="hello.txt"), tool_use("tu_2", "list_dir", path=".")),
        response(text("never")),
    ])
    limited = run("two tools", provider, workspace, sqlite_url)
    assert limited.returncode == 4, limited.stderr
    sid = json_lines(limited.stdout)[0]["session_id"]
    log = log_of(sid, sqlite_url)
    assert tool_events(log, "tu_1")[-1] == "Completed" and tool_events(log, "tu_2")[-1] == "Skipped"

    (workspace / "chronicle.toml").write_text("[limits]\nmax_calls_per_hour = 1\n", encoding="utf-8")
    rated = cli("run", "again", "--session", sid, "--json", db=sqlite_url)
    assert rated.returncode == 4
    assert "model-call rate reached" in rated.stderr


def test_a_bad_limits_table_is_a_usage_error_that_names_the_key(sqlite_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text("[limits]\nbudget = 3\n", encoding="utf-8")
    result = run("x", script(tmp_path / "s.json", [response(text("x"))]), workspace, sqlite_url)
    assert result.returncode == 2
    assert "budget" in result.stderr and "budget_usd" in result.stderr


def _three_turns(provider, workspace, db):
    first = run("turn one", provider, workspace, db)
    sid = json_lines(first.stdout)[0]["session_id"]
    for prompt in ("turn two", "turn three"):
        assert cli("run", prompt, "--session", sid, "--json", db=db).returncode == 0
    return sid


def test_compaction_replaces_older_turns_by_a_summary_and_the_log_keeps_them(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [[response(text(f"answer {i}"))] for i in range(1, 4)], summary=["SUMMARY of turns one and two"])
    sid = _three_turns(provider, workspace, db_url)
    before = history_of(sid, db_url)
    assert len(before) == 6

    compacted = cli("compact", sid, "--keep", "1", "--json", db=db_url)
    assert compacted.returncode == 0, compacted.stderr
    assert json_lines(compacted.stdout)[0]["turns_compacted"] == 2

    after = history_of(sid, db_url)
    assert len(after) == 2
    assert "SUMMARY of turns one and two" in after[0]["content"][0]["text"]
    assert after[0]["content"][-1]["text"] == "turn three" and after[1]["content"][0]["text"] == "answer 3"
    log = log_of(sid, db_url)
    assert [e["data"]["input_text"] for e in log if e["aggregate"] == "turn" and e["event"] == "Created"] == ["turn one", "turn two", "turn three"]
    event = next(e for e in log if e["event"] == "Compacted")
    assert event["data"]["strategy"] == "summary" and len(event["data"]["turn_ids"]) == 2


def test_a_failed_summary_leaves_history_untouched_and_is_recorded(sqlite_url, workspace, tmp_path):
    failing = {"content": [], "stop_reason": "error", "error": {"kind": "overloaded", "message": "try later"}}
    provider = script(tmp_path / "s.json", [[response(text(f"answer {i}"))] for i in range(1, 4)], summary=[failing])
    sid = _three_turns(provider, workspace, sqlite_url)
    result = cli("compact", sid, "--keep", "1", db=sqlite_url)
    assert result.returncode == 1
    assert "summary failed" in result.stderr
    assert len(history_of(sid, sqlite_url)) == 6
    assert any(e["event"] == "CompactionFailed" for e in log_of(sid, sqlite_url))


def test_the_context_monitor_compacts_before_a_turn_when_the_window_is_nearly_full(sqlite_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text("[compaction]\ncontext_window = 40\nkeep_recent = 1\n", encoding="utf-8")
    provider = script(tmp_path / "s.json", [[response(text("a fairly long answer number " + str(i)))] for i in range(1, 4)])
    first = run("first question with some words", provider, workspace, sqlite_url)
    sid = json_lines(first.stdout)[0]["session_id"]
    second = cli("run", "second question", "--session", sid, "--json", db=sqlite_url)
    third = cli("run", "third question", "--session", sid, "--json", db=sqlite_url)
    compactions = [e for r in (second, third) for e in json_lines(r.stdout) if e["type"] == "compaction"]
    assert compactions and compactions[0]["strategy"] in ("summary", "truncate")
    history = history_of(sid, sqlite_url)
    texts = [b.get("text", "") for m in history for b in m["content"]]
    assert "first question with some words" not in texts
    assert texts[-1] == "a fairly long answer number 3"
