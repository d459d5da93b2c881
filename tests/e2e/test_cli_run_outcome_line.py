"""`run` for people: a failure is told once, on stderr, naming the session to `log`."""

from __future__ import annotations

import re

from tests.helpers import cli, response, text, write_script


def test_a_failed_new_run_says_why_once_and_names_its_session(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [{"error": {"kind": "invalid_request", "message": "the model refused the request"}}])
    run = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert run.returncode == 1, run.stderr
    output = run.stdout + run.stderr
    assert output.count("the model refused the request") == 1, output
    [line] = [ln for ln in run.stderr.splitlines() if "refused" in ln]
    assert line.startswith("error: turn failed:") and "chronicle log" in line
    sid = re.search(r"session ([0-9a-f-]{36})", line).group(1)
    assert f"chronicle log {sid}" in line
    assert cli("log", sid, db=sqlite_url).returncode == 0


def test_a_completed_run_still_names_its_session(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("fine"))])
    run = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert run.returncode == 0, run.stderr
    assert "fine" in run.stdout and run.stderr.strip().startswith("session ")


def test_calls_skipped_by_a_guard_get_a_tool_end_line(sqlite_url, workspace, tmp_path):
    from tests.helpers import json_lines, tool_use

    script = write_script(tmp_path / "s.json", [
        response(tool_use("t1", "read_file", path="hello.txt"), tool_use("t2", "list_dir", path=".")), response(text("ok")),
    ])
    run = cli("run", "look", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--max-tool-calls", "1",
              "--json", db=sqlite_url)
    assert run.returncode == 4, run.stderr
    ends = {e["tool_use_id"]: e for e in json_lines(run.stdout) if e["type"] == "tool_end"}
    assert ends["t1"]["status"] == "completed"
    assert ends["t2"]["status"] == "skipped" and ends["t2"]["is_error"] and ends["t2"]["output"].startswith("skipped: not run")
    human = cli("run", "look", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--max-tool-calls", "1", db=sqlite_url)
    assert "✗ list_dir skipped" in human.stdout, human.stdout


def test_projections_run_counts_new_events_not_applications_per_projection(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("fine"))])
    assert cli("projections", "run", db=sqlite_url).returncode == 0
    run = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    assert run.returncode == 0, run.stderr
    from tests.helpers import json_lines

    head = json_lines(cli("projections", "status", "--json", db=sqlite_url).stdout)[0]["head"]
    caught = cli("projections", "run", db=sqlite_url)
    assert caught.returncode == 0, caught.stderr
    found = re.search(r"applied (\d+) new event\(s\) \(positions (\d+)\.\.(\d+)\) to (\d+) projection", caught.stderr)
    assert found, caught.stderr
    events, first, last, projections = map(int, found.groups())
    assert (events, first, last) == (head, 1, head), "SQLite positions have no gaps: one event per position"
    assert projections > 1 and f"{events * projections} application(s)" in caught.stderr
