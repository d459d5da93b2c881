"""Seed 004's instance names through the real CLI: two children of one agent definition are told apart as
`<agent>-<task slug>-<n>` in the delegate result, the live events, `sessions` and `log --tree`, numbered across the
parent's delegate calls; the `agent` field keeps the definition's name (both backends)."""

from __future__ import annotations

import json

from chronicle.domain.instance_names import instance_name, task_slug
from tests.helpers import cli, json_lines, response, text, tool_use, write_script

REGISTRY = """
[agents.main]
instructions = "You lead."

[agents.researcher]
description = "Reads files and reports"
"""


def delegate(id_: str, *tasks: str) -> dict:
    return tool_use(id_, "delegate", tasks=[{"agent": "researcher", "task": t} for t in tasks])


def complete(id_: str, summary: str) -> dict:
    return tool_use(id_, "task_complete", status="completed", summary=summary)


def test_a_task_slug_is_its_first_telling_words():
    assert task_slug("Parse the config file, then report") == "parse-config"
    assert task_slug("What is in notes.md?\nLook closely.") == "notes-md"
    assert task_slug("  ") == task_slug("the of 42") == "task"
    assert task_slug("Übersetze das Handbuch") == "übersetze-das"
    assert instance_name("coder", "Refactor the parser", 2) == "coder-refactor-parser-2"
    assert len(task_slug("x" * 100 + " y")) <= 24


def test_children_of_one_agent_are_told_apart_by_instance_name_across_delegate_calls(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    script = write_script(
        tmp_path / "script.json",
        [[response(delegate("d1", "Parse the config file", "Parse the log file")), response(text("Both parsed."))],
         [response(delegate("d2", "Summarize the findings")), response(text("Summarized."))]],
        researcher=[response(complete("c1", "done")), response(complete("c2", "done")), response(complete("c3", "done"))],
    )
    first = cli("run", "parse both", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert first.returncode == 0, first.stderr
    events = json_lines(first.stdout)
    sid = events[0]["session_id"]
    end = next(e for e in events if e["type"] == "tool_end" and e["name"] == "delegate")
    rows = json.loads(end["output"])["results"]
    assert [(r["agent"], r["instance"]) for r in rows] == [("researcher", "researcher-parse-config-1"),
                                                           ("researcher", "researcher-parse-log-2")]
    started = {e["session_id"]: e.get("instance") for e in events if e["type"] == "agent_start" and e["parent_session_id"]}
    assert started == {r["session_id"]: r["instance"] for r in rows}

    # a later call numbers on from the earlier ones; people read the instance name in run's own lines
    second = cli("run", "summarize", "--session", sid, "--provider", f"scripted:{script}", db=db_url)
    assert second.returncode == 0, second.stderr
    assert "researcher-summarize-findings-3 started" in second.stdout + second.stderr

    listed = {r["session_id"]: r for r in json_lines(cli("sessions", "--json", db=db_url).stdout)}
    assert listed[sid]["instance"] is None and listed[sid]["agent"] == "main"
    children = sorted(r["instance"] for r in listed.values() if r["parent_session_id"] == sid)
    assert children == ["researcher-parse-config-1", "researcher-parse-log-2", "researcher-summarize-findings-3"]
    assert all(r["agent"] == "researcher" for r in listed.values() if r["parent_session_id"] == sid)
    table = cli("sessions", "--no-pager", db=db_url, env={"COLUMNS": "200"})
    assert "↳ researcher-parse-config-1" in table.stdout and "↳ researcher-summarize-findings-3" in table.stdout, table.stdout
    tree = cli("log", sid, "--tree", "--no-pager", db=db_url, env={"COLUMNS": "200"})
    assert "researcher-parse-log-2" in tree.stdout, tree.stdout
    logged = json_lines(cli("log", sid, "--tree", "--json", db=db_url).stdout)
    assert {e.get("instance") for e in logged if e["session_id"] != sid} == set(children)
    assert all("instance" not in e for e in logged if e["session_id"] == sid)
    started = [r for r in json_lines(cli("audit", "--json", db=db_url).stdout) if r["kind"] == "subagent_start"]
    assert sorted(r["detail"]["instance"] for r in started) == children
    costs = json_lines(cli("cost", sid, "--json", db=db_url).stdout)
    assert sorted(o["instance"] for o in costs if o["scope"] == "child") == children
    assert all("instance" not in o for o in costs if o["scope"] != "child")
    tasks = json_lines(cli("tasks", sid, "--json", db=db_url).stdout)
    assert sorted(t["instance"] for t in tasks) == children and all(t["agent"] == "researcher" for t in tasks)
    assert "researcher-parse-log-2" in cli("tasks", sid, db=db_url, env={"COLUMNS": "200"}).stdout
