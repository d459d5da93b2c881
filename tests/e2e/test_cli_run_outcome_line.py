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
