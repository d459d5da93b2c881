"""The projections CLI contract (issue 4), checked from outside through real subprocesses."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone
from uuid import uuid4

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.session import Session
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.tools import DEFAULT_TOOLS
from tests import processes
from tests.helpers import cli, json_lines, text, tool_use

TOKENS = ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")


def usage(i: int, o: int, cw: int = 0, cr: int = 0) -> dict:
    return {"input_tokens": i, "output_tokens": o, "cache_creation_input_tokens": cw, "cache_read_input_tokens": cr}


def script(path, responses, title=("Counting the project files",)):  # type: ignore[no-untyped-def]
    path.write_text(json.dumps({"agents": {"main": responses}, "title": list(title)}), encoding="utf-8")
    return path


def run(prompt, provider, workspace, db, *extra):  # type: ignore[no-untyped-def]
    done = cli("run", prompt, "--provider", f"scripted:{provider}", "--workspace", str(workspace), "--json", *extra, db=db)
    return done, json_lines(done.stdout)


def test_cost_equals_usage_times_price_summed_by_hand_with_the_sub_agent_rolled_up(sqlite_url, workspace, tmp_path):
    db_url = sqlite_url
    parent_script = script(tmp_path / "p.json", [
        {"content": [tool_use("tu_1", "list_dir", path=".")], "stop_reason": "tool_use", "usage": usage(1000, 200, cw=300, cr=400)},
        {"content": [text("Two files.")], "stop_reason": "end_turn", "usage": usage(1500, 100, cr=700)},
    ])
    done, events = run("count files", parent_script, workspace, db_url, "--model", "claude-sonnet-4-5")
    assert done.returncode == 0, done.stderr
    parent = events[0]["session_id"]

    store = ChronicleStore(db_url)  # a sub-agent session, created as the sub-agent runtime creates them
    child = uuid4()
    spec = AgentSpec(name="main", model="claude-haiku-4-5", tools=DEFAULT_TOOLS, workspace=str(workspace))
    store.create_session(Session.start(child, spec, datetime.now(timezone.utc), parent_session_id=store.session_ids()[0],
                                       parent_tool_call_id=uuid4()))
    store.close()
    child_script = script(tmp_path / "c.json", [{"content": [text("sub done")], "stop_reason": "end_turn", "usage": usage(2000, 50, cr=1000)}])
    done = cli("run", "sub task", "--session", str(child), "--provider", f"scripted:{child_script}", "--workspace", str(workspace), db=db_url)
    assert done.returncode == 0, done.stderr

    # USD per million tokens: sonnet 4.5 3 / 15 / 3.75 / 0.30, haiku 4.5 1 / 5 / 1.25 / 0.10; titles cost nothing here
    own = (2500 * 3 + 300 * 15 + 300 * 3.75 + 1100 * 0.30) / 1e6
    sub = (2000 * 1 + 50 * 5 + 1000 * 0.10) / 1e6
    rows = json_lines(cli("cost", parent, "--json", db=db_url).stdout)
    by_scope = {r["scope"]: r for r in rows}
    assert sorted(by_scope) == ["child", "self", "total"]
    assert [by_scope["self"][k] for k in TOKENS] == [2500, 300, 300, 1100]
    assert by_scope["self"]["usd"] == pytest.approx(own, abs=1e-6)
    assert by_scope["child"]["session_id"] == str(child) and by_scope["child"]["usd"] == pytest.approx(sub, abs=1e-6)
    assert by_scope["total"]["usd"] == pytest.approx(own + sub, abs=1e-6)
    assert [by_scope["total"][k] for k in TOKENS] == [4500, 350, 300, 2100]

    by_model = json_lines(cli("cost", parent, "--by", "model", "--json", db=db_url).stdout)
    total_models = {r["model"]: r["usd"] for r in by_model if r["scope"] == "total"}
    assert total_models == {"claude-sonnet-4-5": pytest.approx(own, abs=1e-6), "claude-haiku-4-5": pytest.approx(sub, abs=1e-6)}
    days = json_lines(cli("cost", "--by", "day", "--json", db=db_url).stdout)
    assert {r["session_id"] for r in days} == {parent, str(child)} and all(r["scope"] == "total" and len(r["day"]) == 10 for r in days)

    sessions = {s["session_id"]: s for s in json_lines(cli("sessions", "--json", db=db_url).stdout)}
    assert sessions[parent]["title"] == "Counting the project files"
    assert sessions[parent]["cost"] == pytest.approx(own + sub, abs=1e-6)


def test_the_cost_and_sessions_tables_show_dollars_at_one_precision_and_explain_unpriced_once(db_url, workspace, tmp_path):
    """`cost` printed `0.000000` in one row and `? (8 unpriced)` in the next: money is `$0.0060` in every row of both
    tables, a figure with an unpriced call `?`, said once under the table; `--json` keeps its numbers."""
    priced_script = script(tmp_path / "p.json", [{"content": [text("priced")], "stop_reason": "end_turn", "usage": usage(1000, 200)}])
    done, events = run("priced", priced_script, workspace, db_url, "--model", "claude-sonnet-4-5")
    assert done.returncode == 0, done.stderr
    priced = events[0]["session_id"]
    unpriced_script = script(tmp_path / "u.json", [{"content": [text("free?")], "stop_reason": "end_turn", "usage": usage(10, 5)}])
    done, events = run("unpriced", unpriced_script, workspace, db_url)  # the scripted model has no price
    assert done.returncode == 0, done.stderr
    unpriced = events[0]["session_id"]

    figures = {r["session_id"]: r for r in json_lines(cli("cost", "--json", db=db_url).stdout)}
    assert figures[priced]["usd"] == pytest.approx((1000 * 3 + 200 * 15) / 1e6, abs=1e-9)  # sonnet 4.5: 3 / 15 per Mtok
    assert figures[unpriced]["usd"] is None and figures[unpriced]["unpriced_calls"] == 1
    for command, money in ((("cost",), -1), (("sessions",), 4)):
        shown = cli(*command, db=db_url, env={"COLUMNS": "200"})
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        rows = {line.split()[1 if command == ("cost",) else 0]: line.split() for line in lines[1:] if line.strip()}
        assert rows[priced[:8]][money] == "$0.0060" and rows[unpriced[:8]][money] == "?", shown.stdout
        notes = [line for line in lines if line.startswith("?: no USD figure")]
        assert len(notes) == 1 and "CHRONICLE_PRICES" in shown.stdout and "unpriced)" not in shown.stdout, shown.stdout


def test_audit_lists_every_decision_and_filters_by_session_tool_errors_and_time(sqlite_url, workspace, tmp_path):
    steps = script(tmp_path / "s.json", [
        {"content": [tool_use("tu_1", "read_file", path="hello.txt"), tool_use("tu_2", "read_file", file="x")],
         "stop_reason": "tool_use", "usage": usage(10, 5)},
        {"content": [text("done")], "stop_reason": "end_turn", "usage": usage(10, 5)},
    ])
    done, events = run("read", steps, workspace, sqlite_url)
    assert done.returncode == 0, done.stderr
    sid = events[0]["session_id"]
    failing = tmp_path / "f.json"
    failing.write_text(json.dumps({"agents": {"main": [{"error": {"kind": "invalid_request_error", "message": "bad", "retryable": False}}]}}))
    assert run("fail", failing, workspace, sqlite_url)[0].returncode == 1

    everything = json_lines(cli("audit", "--json", db=sqlite_url).stdout)
    assert all({"session_id", "turn", "kind", "time"} <= set(e) for e in everything)
    kinds = [e["kind"] for e in everything if e["session_id"] == sid]
    assert kinds[:2] == ["session_start", "input"] and "model_call" in kinds and kinds.count("tool_call") == 2 and "turn_end" in kinds
    tool_rows = json_lines(cli("audit", "--tool", "read_file", "--json", db=sqlite_url).stdout)
    assert [(r["detail"]["input"], r["is_error"]) for r in tool_rows] == [({"path": "hello.txt"}, False), ({"file": "x"}, True)]
    assert tool_rows[0]["detail"]["output"].startswith("hello world") and tool_rows[0]["turn"] == 1
    errors = json_lines(cli("audit", "--errors", "--json", db=sqlite_url).stdout)
    assert {e["kind"] for e in errors} == {"tool_call", "model_call", "failure"} and all(e["is_error"] for e in errors)
    only = json_lines(cli("audit", "--session", sid[:8], "--since", "1h", "--json", db=sqlite_url).stdout)
    assert only == [e for e in everything if e["session_id"] == sid]
    bad = cli("audit", "--since", "yesterday-ish", db=sqlite_url)
    assert bad.returncode == 2 and "--since" in bad.stderr


def test_a_failed_title_call_is_recorded_and_the_turn_still_completes(sqlite_url, workspace, tmp_path):
    broken = script(tmp_path / "s.json", [{"content": [text("answer")], "stop_reason": "end_turn", "usage": usage(10, 5)}],
                    title=[{"error": {"kind": "overloaded_error", "message": "Overloaded", "retryable": True}}])
    done, events = run("hello", broken, workspace, sqlite_url)
    assert done.returncode == 0, done.stderr
    assert json_lines(cli("sessions", "--json", db=sqlite_url).stdout)[0]["title"] is None
    title_rows = [e for e in json_lines(cli("audit", "--json", db=sqlite_url).stdout) if e["kind"] == "title"]
    assert len(title_rows) == 1 and title_rows[0]["is_error"] and "Overloaded" in title_rows[0]["detail"]["reason"]


def test_status_shows_zero_lag_after_rebuild_and_bad_names_are_usage_errors(sqlite_url, workspace, tmp_path):
    done, _ = run("hi", script(tmp_path / "s.json", [{"content": [text("hi")], "usage": usage(1, 1)}]), workspace, sqlite_url)
    assert done.returncode == 0, done.stderr
    before = json_lines(cli("projections", "status", "--json", db=sqlite_url).stdout)
    assert {s["name"] for s in before} == {"history", "summaries", "cost", "audit"} and all(s["lag"] > 0 for s in before)
    rebuilt = cli("projections", "rebuild", "cost", db=sqlite_url)
    assert rebuilt.returncode == 0, rebuilt.stderr
    after = {s["name"]: s for s in json_lines(cli("projections", "status", "--json", db=sqlite_url).stdout)}
    assert after["cost"]["lag"] == 0 and after["cost"]["position"] == after["cost"]["head"] and after["audit"]["lag"] > 0
    unknown = cli("projections", "rebuild", "nope", db=sqlite_url)
    assert unknown.returncode == 2 and "history" in unknown.stderr
    assert cli("cost", "--by", "week", db=sqlite_url).returncode == 2


def test_run_follow_keeps_projections_current_and_stops_cleanly_on_sigterm(db_url, workspace, tmp_path):
    env = {k: v for k, v in __import__("os").environ.items() if k != "ANTHROPIC_API_KEY"}
    env["CHRONICLE_DB"] = db_url
    follower = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "projections", "run", "--follow", "--poll", "0.1"],
                               env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        done, _ = run("hi", script(tmp_path / "s.json", [{"content": [text("hi")], "usage": usage(1, 1)}]), workspace, db_url)
        assert done.returncode == 0, done.stderr
        deadline = time.monotonic() + 20
        while True:
            status = json_lines(cli("projections", "status", "--json", db=db_url).stdout)
            if all(s["lag"] == 0 and s["position"] > 0 for s in status):
                break
            if time.monotonic() >= deadline or follower.poll() is not None:
                follower.kill()
                pytest.fail(f"follower did not catch up: {status}; it said: {follower.communicate()[1]}")
            time.sleep(0.2)
        follower.send_signal(signal.SIGTERM)
        _, err = follower.communicate(timeout=15)
        assert follower.returncode == 0, err
        assert "stopped" in err
    finally:
        processes.stop(follower)
