"""The task board and failure reflections through the real CLI: statuses shared by parent and children,
failures with their reflections in audit, reflections offered to a later similar delegation, and a
task left in_progress by a killed parent settled by resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.task_board import tasks_of
from tests import processes
from tests.e2e.test_cli_subagents import REGISTRY, complete, delegate
from tests.e2e.test_cli_subagents_crash import script as crash_script
from tests.e2e.test_cli_subagents_crash import wait_for
from tests.helpers import cli, json_lines, response, text, tool_use, write_script


def run(tmp_path, workspace, db_url, name: str, main, **agents):
    script = write_script(tmp_path / f"{name}.json", main, **agents)
    result = cli("run", "investigate", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert result.returncode == 0, result.stderr
    return json_lines(result.stdout)


def test_delegated_tasks_end_completed_or_failed_and_a_failure_leaves_a_reflection_for_the_next_similar_task(
    db_url, workspace, tmp_path
):
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    events = run(
        tmp_path, workspace, db_url, "first",
        [response(delegate("tu_d", ("researcher", "summarise hello.txt"), ("breaker", "count the widgets in inventory"))),
         response(text("Noted."))],
        researcher=[response(complete("r1", "hello world"))],
        breaker=[response(tool_use("b1", "list_dir", path="."))],
    )
    parent = events[0]["session_id"]
    children = {e["agent"]: e["session_id"] for e in events if e["type"] == "agent_start" and e.get("parent_session_id")}

    listed = cli("tasks", parent, "--json", db=db_url)
    assert listed.returncode == 0, listed.stderr
    tasks = {t["agent"]: t for t in json_lines(listed.stdout)}
    assert tasks["researcher"] == {**tasks["researcher"], "status": "completed", "summary": "hello world",
                                   "child_session_id": children["researcher"]}
    assert tasks["breaker"]["status"] == "failed" and "max_iterations reached" in tasks["breaker"]["summary"]
    assert tasks["breaker"]["child_session_id"] == children["breaker"]
    reflection = tasks["breaker"]["reflection"]
    assert reflection["task"] == "count the widgets in inventory"
    assert "widgets" in reflection["keywords"] and "inventory" in reflection["keywords"]
    assert "list_dir×1" in reflection["what_happened"]
    assert "max_iterations reached" in cli("tasks", parent, db=db_url).stdout

    audit = json_lines(cli("audit", "--session", parent, "--json", db=db_url).stdout)
    board = [(e["kind"], e["name"], e["status"]) for e in audit if e["kind"] in ("task", "reflection")]
    for agent in ("researcher", "breaker"):
        assert [s for k, n, s in board if k == "task" and n == agent][:2] == ["pending", "in_progress"]
    assert ("task", "researcher", "completed") in board and ("task", "breaker", "failed") in board
    assert ("reflection", "breaker", None) in board

    # A later delegation of a similar task reads the reflection first; an unrelated one does not.
    later = run(
        tmp_path, workspace, db_url, "second",
        [response(delegate("tu_e", ("breaker", "recount widgets please"), ("researcher", "describe hello.txt"))),
         response(text("ok"))],
        breaker=[response(complete("b2", "42 widgets"))],
        researcher=[response(complete("r2", "a greeting"))],
    )
    second = {e["agent"]: e["session_id"] for e in later if e["type"] == "agent_start" and e.get("parent_session_id")}
    inputs = {
        agent: next(e for e in json_lines(cli("audit", "--session", sid, "--json", db=db_url).stdout) if e["kind"] == "input")
        for agent, sid in second.items()
    }
    offered = inputs["breaker"]["detail"]["text"]
    assert offered.startswith("<prior_reflections>") and "count the widgets in inventory" in offered
    assert offered.rstrip().endswith("recount widgets please")
    assert "<prior_reflections>" not in inputs["researcher"]["detail"]["text"]
    assert all(t["status"] == "completed" for t in json_lines(cli("tasks", later[0]["session_id"], "--json", db=db_url).stdout))


def test_a_session_that_delegated_nothing_has_an_empty_board_and_an_unknown_one_is_an_error(sqlite_url, workspace, tmp_path):
    events = run(tmp_path, workspace, sqlite_url, "plain", [response(text("hi"))])
    assert cli("tasks", events[0]["session_id"], "--json", db=sqlite_url).stdout == ""
    missing = cli("tasks", "ffffffff", db=sqlite_url)
    assert missing.returncode == 2 and "no session matches" in missing.stderr


def test_a_task_left_in_progress_by_a_killed_parent_is_settled_by_resume(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    path = tmp_path / "script.json"
    path.write_text(json.dumps(crash_script(slow_s=60)), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY",)}
    env["CHRONICLE_DB"] = db_url
    proc = processes.start(
        [sys.executable, "-m", "chronicle.runtime.cli", "run", "investigate", "--provider", f"scripted:{path}",
         "--workspace", str(workspace), "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    store = ChronicleStore(db_url)
    parent = None
    try:
        def board():
            ids = [s for s in store.session_ids() if store.session(s).parent_session_id is None]
            if not ids:
                return None
            rows = {t.agent: t.status for t in tasks_of(store, store.session(ids[0]))}
            return (ids[0], rows) if rows == {"researcher": "in_progress", "auditor": "completed"} else None

        parent, _ = wait_for(board, "the auditor's task completed and the researcher's in progress")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    path.write_text(json.dumps(crash_script(slow_s=0)), encoding="utf-8")
    resumed = cli("resume", str(parent), "--json", db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    rows = json_lines(cli("tasks", str(parent), "--json", db=db_url).stdout)
    assert {r["agent"]: (r["status"], r["summary"]) for r in rows} == {
        "researcher": ("completed", "it says hello world"), "auditor": ("completed", "looks fine"),
    }
    audit = json_lines(cli("audit", "--session", str(parent), "--json", db=db_url).stdout)
    assert [e["status"] for e in audit if e["kind"] == "task" and e["name"] == "researcher"] == ["pending", "in_progress", "completed"]
