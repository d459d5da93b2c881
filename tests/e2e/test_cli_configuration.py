"""Configuration from outside: bad values exit 2 with one line naming them; recorded limits survive a rewritten chronicle.toml."""

from __future__ import annotations

import json

import pytest

from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, json_lines, response, text, tool_use


def script(path, turns):
    path.write_text(json.dumps({"agents": {"main": turns}}), encoding="utf-8")
    return f"scripted:{path}"


@pytest.mark.parametrize("env,toml,named", [
    ({"CHRONICLE_HTTP_TIMEOUT_S": "abc"}, "", "CHRONICLE_HTTP_TIMEOUT_S"),
    ({}, '[compaction]\nauto = "yes"\n', "[compaction] auto"),
    ({}, "[compaction]\nthreshold = 2\n", "[compaction] threshold"),
    ({}, "[limits]\nbudget_usd = nan\n", "[limits] budget_usd"),
])
def test_a_bad_setting_exits_2_with_one_line_and_records_nothing(sqlite_url, workspace, tmp_path, env, toml, named):
    if toml:
        (workspace / "chronicle.toml").write_text(toml, encoding="utf-8")
    provider = script(tmp_path / "s.json", [[response(text("hi"))]])
    run = cli("run", "hello", "--provider", provider, "--workspace", str(workspace), db=sqlite_url, env=env)
    assert run.returncode == 2, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and named in lines[0], run.stderr
    assert "Traceback" not in run.stderr
    assert ChronicleStore(sqlite_url).session_ids() == []


def test_a_broken_prices_file_fails_loudly(sqlite_url, tmp_path):
    prices = tmp_path / "prices.json"
    prices.write_text("{oops", encoding="utf-8")
    listed = cli("cost", db=sqlite_url, env={"CHRONICLE_PRICES": str(prices)})
    assert listed.returncode == 2 and "CHRONICLE_PRICES" in listed.stderr and "not valid JSON" in listed.stderr


def test_limits_a_session_started_with_are_not_widened_by_rewriting_chronicle_toml(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text("[limits]\nmax_tool_calls = 1\n", encoding="utf-8")
    provider = script(tmp_path / "s.json", [
        [response(tool_use("a", "read_file", path="hello.txt")), response(text("one"))],
        [response(tool_use("b", "read_file", path="hello.txt"), tool_use("c", "read_file", path="hello.txt")), response(text("two"))],
        [response(tool_use("d", "read_file", path="hello.txt"), tool_use("e", "read_file", path="hello.txt")), response(text("three"))],
    ])
    first = cli("run", "first", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert first.returncode == 0, first.stderr
    sid = json_lines(first.stdout)[0]["session_id"]
    # The agent (or anyone with the workspace) rewrites the file: the session keeps its recorded limit.
    (workspace / "chronicle.toml").write_text("[limits]\nmax_tool_calls = 100000\n", encoding="utf-8")
    second = cli("run", "second", "--session", sid, "--json", db=db_url)
    assert second.returncode == 4, second.stderr
    assert "tool-call limit reached: 1 per turn" in second.stderr
    # The operator widens it with a flag.
    third = cli("run", "third", "--session", sid, "--max-tool-calls", "5", "--json", db=db_url)
    assert third.returncode == 0, third.stderr
    ends = [e for e in json_lines(third.stdout) if e["type"] == "turn_end"]
    assert [(e["status"], e["text"]) for e in ends] == [("completed", "three")]
