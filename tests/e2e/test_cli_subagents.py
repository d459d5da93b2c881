"""Sub-agents through the real CLI: registry, concurrent delegation, read-only children,
structured completion, synthetic failures, the session tree and usage rolled up to the parent."""

from __future__ import annotations

import json
from collections import Counter

from tests.helpers import cli, json_lines, response, text, tool_use, write_script

REGISTRY = """
[agents.main]
instructions = "You lead. Delegate reading to the others."

[agents.researcher]
description = "Reads files and reports"
instructions = "Answer from the files."

[agents.auditor]
description = "Checks things, read-only"

[agents.breaker]
description = "Gives up quickly"
max_iterations = 1
"""


def delegate(id_: str, *tasks: tuple[str, str]) -> dict:
    return tool_use(id_, "delegate", tasks=[{"agent": a, "task": t, "context": "the workspace has hello.txt"} for a, t in tasks])


def complete(id_: str, summary: str, status: str = "completed", **extra: object) -> dict:
    return tool_use(id_, "task_complete", status=status, summary=summary, **extra)


def run_with_agents(tmp_path, workspace, db_url, main, **agents):
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    script = write_script(tmp_path / "script.json", main, **agents)
    return cli("run", "investigate", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)


def delegate_result(events: list[dict]) -> dict:
    end = next(e for e in events if e["type"] == "tool_end" and e["name"] == "delegate")
    return {r["agent"]: r for r in json.loads(end["output"])["results"]}


def test_two_children_run_concurrently_and_their_reports_come_back_in_one_result(db_url, workspace, tmp_path):
    run = run_with_agents(
        tmp_path, workspace, db_url,
        [response(delegate("tu_d", ("researcher", "what does hello.txt say?"), ("auditor", "count the lines")), usage=(100, 20)),
         response(text("Both reported."), usage=(200, 10))],
        researcher=[response(tool_use("r1", "read_file", path="hello.txt"), delay_s=0.05, usage=(30, 3)),
                    response(complete("r2", "hello.txt says hello world", files_modified=[]), usage=(40, 4))],
        auditor=[response(tool_use("a1", "grep", pattern="line"), delay_s=0.05, usage=(50, 5)),
                 response(complete("a2", "two lines", caveats="counted by grep", tests_run=["grep -c line: 2"]), usage=(60, 6))],
    )
    assert run.returncode == 0, run.stderr
    events = json_lines(run.stdout)
    parent_id = events[0]["session_id"]
    assert events[-1] == {**events[-1], "type": "agent_end", "session_id": parent_id, "status": "completed", "depth": 0}

    starts = [i for i, e in enumerate(events) if e["type"] == "agent_start" and e["parent_session_id"]]
    ends = [i for i, e in enumerate(events) if e["type"] == "agent_end" and e["parent_session_id"]]
    assert len(starts) == len(ends) == 2
    assert max(starts) < min(ends), "the second child started before the first one finished"
    children = {events[i]["agent"]: events[i] for i in starts}
    call_id = next(e for e in events if e["type"] == "tool_start" and e["name"] == "delegate")["tool_call_id"]
    for child in children.values():
        assert child["parent_session_id"] == parent_id and child["parent_tool_call_id"] == call_id and child["depth"] == 1
    assert all(events[i]["depth"] == 1 for i in ends), "agent_end carries the same depth as its agent_start"

    results = delegate_result(events)
    assert results["researcher"]["status"] == "completed"
    assert results["researcher"]["summary"] == "hello.txt says hello world"
    assert results["auditor"]["caveats"] == "counted by grep"
    assert (results["auditor"]["tests_run"], results["researcher"]["tests_run"]) == (["grep -c line: 2"], [])
    assert results["researcher"]["session_id"] == children["researcher"]["session_id"]
    # task_complete ended each child's turn: no third model call was made (the script has none)
    assert [e["status"] for e in events if e["type"] == "turn_end" and e["session_id"] != parent_id] == ["completed"] * 2

    sessions = json_lines(cli("sessions", "--json", db=db_url).stdout)
    by_id = {s["session_id"]: s for s in sessions}
    assert len(sessions) == 3
    assert {by_id[c["session_id"]]["parent_session_id"] for c in children.values()} == {parent_id}
    human = cli("sessions", db=db_url)
    assert "↳ researcher" in human.stdout and "↳ auditor" in human.stdout

    log = json_lines(cli("log", parent_id, "--tree", "--json", db=db_url).stdout)
    assert [e["position"] for e in log] == sorted(e["position"] for e in log)
    assert {(e["agent"], e["depth"]) for e in log} == {("main", 0), ("researcher", 1), ("auditor", 1)}
    child_positions = [e["position"] for e in log if e["depth"] == 1]
    parent_positions = [e["position"] for e in log if e["depth"] == 0]
    assert min(parent_positions) < min(child_positions) and max(child_positions) < max(parent_positions), "not interleaved"
    assert all(e["depth"] == 0 for e in json_lines(cli("log", parent_id, "--json", db=db_url).stdout) if "depth" in e)
    assert "researcher" in cli("log", parent_id, "--tree", db=db_url).stdout

    # usage rolled up through the parent links: the parent's own plus each child's
    usage: Counter = Counter()
    for e in log:
        if e["event"] == "ModelResponded":
            usage[e["session_id"]] += e["data"]["response"]["usage"]["input_tokens"] + e["data"]["response"]["usage"]["output_tokens"]
    assert usage[parent_id] == 330
    assert usage[children["researcher"]["session_id"]] == 77 and usage[children["auditor"]["session_id"]] == 121
    assert sum(usage.values()) == 528


def test_read_only_child_is_refused_a_write_tool_and_failing_children_get_synthetic_results(db_url, workspace, tmp_path):
    run = run_with_agents(
        tmp_path, workspace, db_url,
        [response(delegate("tu_d", ("auditor", "write a report"), ("breaker", "loop forever"), ("researcher", "just answer"))),
         response(text("Noted."))],
        auditor=[response(tool_use("w1", "write_file", path="report.txt", content="x")),
                 response(complete("w2", "I may not write files", status="failed"))],
        breaker=[response(tool_use("b1", "list_dir", path="."))],
        researcher=[response(text("hello world, says the file"))],
    )
    assert run.returncode == 0, run.stderr
    events = json_lines(run.stdout)
    refused = next(e for e in events if e["type"] == "tool_end" and e["name"] == "write_file")
    assert refused["is_error"] and refused["output"] == "unknown tool: write_file"
    assert not (workspace / "report.txt").exists()

    results = delegate_result(events)
    assert results["auditor"]["status"] == "failed" and results["auditor"]["summary"] == "I may not write files"
    assert results["breaker"]["status"] == "failed" and "max_iterations reached" in results["breaker"]["summary"]
    assert results["researcher"]["status"] == "completed"
    assert results["researcher"]["summary"] == "hello world, says the file"
    assert "without calling task_complete" in results["researcher"]["caveats"]
    breaker_end = next(e for e in events if e["type"] == "agent_end" and e["agent"] == "breaker")
    assert breaker_end["status"] == "failed" and "max_iterations" in breaker_end["reason"]


def test_main_gets_delegation_tools_only_when_the_registry_defines_other_agents(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(tool_use("t1", "delegate", tasks=[{"agent": "x", "task": "y"}])),
                                                response(text("ok"))])
    run = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    assert run.returncode == 0, run.stderr
    end = next(e for e in json_lines(run.stdout) if e["type"] == "tool_end")
    assert end["output"] == "unknown tool: delegate"


def test_a_bad_registry_file_is_a_usage_error_naming_the_key(sqlite_url, workspace, tmp_path):
    bad = tmp_path / "agents.toml"
    bad.write_text("[agents.researcher]\ntools = ['read_file']\nmax_iterationz = 3\n", encoding="utf-8")
    run = cli("run", "go", "--provider", "scripted:/nonexistent.json", "--workspace", str(workspace), "--agents", str(bad), db=sqlite_url)
    assert run.returncode == 2
    assert "agents.researcher.max_iterationz" in run.stderr and "unknown key" in run.stderr
    assert "Traceback" not in run.stderr

    bad.write_text("[agents.researcher]\ntools = ['rm_rf']\n", encoding="utf-8")
    run = cli("run", "go", "--provider", "scripted:/nonexistent.json", "--workspace", str(workspace), "--agents", str(bad), db=sqlite_url)
    assert run.returncode == 2 and "agents.researcher.tools" in run.stderr and "rm_rf" in run.stderr

    run = cli("run", "go", "--workspace", str(workspace), "--agents", str(tmp_path / "missing.toml"), db=sqlite_url)
    assert run.returncode == 2 and "not found" in run.stderr
    assert cli("sessions", "--json", db=sqlite_url).stdout == "", "a refused run must record nothing"


def test_a_second_task_complete_in_the_same_response_is_ignored_and_the_first_report_stands(db_url, workspace, tmp_path):
    """Seed 004: duplicate task_complete calls are safely ignored. The child's turn ends at the step that reported (no
    further model call: its script has none), and the parent reads the first report, not the second."""
    run = run_with_agents(
        tmp_path, workspace, db_url,
        [response(delegate("tu_d", ("researcher", "what does hello.txt say?"))), response(text("Reported."))],
        researcher=[response(complete("c1", "it says hello"), complete("c2", "never mind", status="failed"))],
    )
    assert run.returncode == 0, run.stderr
    results = delegate_result(json_lines(run.stdout))
    assert (results["researcher"]["status"], results["researcher"]["summary"]) == ("completed", "it says hello")
    child = results["researcher"]["session_id"]
    logged = json_lines(cli("log", child, "--json", db=db_url).stdout)
    turn_ends = [e for e in logged if e["event"] == "Completed" and e["aggregate"] == "turn"]
    assert len(turn_ends) == 1
    # what the log (and so why, audit and the child's history) says of each call: the second reported nothing
    said = {e["data"].get("tool_use_id"): e["data"].get("output") for e in logged
            if e["aggregate"] == "tool_call" and e["event"] == "Completed"}
    assert said["c1"] == "reported completed to the parent agent; your turn ends here"
    assert said["c2"].startswith("ignored: task_complete was already called in this answer (it reported completed)")
