"""A parent killed while its children run: `chronicle resume` continues the same children, none twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from chronicle.domain.ids import turn_id
from chronicle.runtime.agents.children import TASK_INPUT_ID
from chronicle.runtime.store import ChronicleStore, NotFound
from tests import processes
from tests.e2e.test_cli_subagents import REGISTRY, complete, delegate
from tests.helpers import cli, json_lines, response, text, tool_use


def script(slow_s: float) -> dict:
    return {
        "agents": {
            "main": [response(delegate("tu_d", ("researcher", "read hello.txt"), ("auditor", "check it"))),
                     response(text("Both children reported."))],
            "researcher": [response(tool_use("r1", "read_file", path="hello.txt")),
                           response(complete("r2", "it says hello world"), delay_s=slow_s)],
            "auditor": [response(complete("a1", "looks fine"))],
        }
    }


def wait_for(condition, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_parent_killed_mid_delegation_resumes_its_children_without_duplicates(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    path = tmp_path / "script.json"
    path.write_text(json.dumps(script(slow_s=60)), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY",)}
    env["CHRONICLE_DB"] = db_url
    proc = processes.start(
        [sys.executable, "-m", "chronicle.runtime.cli", "run", "investigate", "--provider", f"scripted:{path}",
         "--workspace", str(workspace), "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    store = ChronicleStore(db_url)
    try:
        def mid_delegation():
            sessions = [store.session(s) for s in store.session_ids()]
            children = {s.spec.name: s for s in sessions if s.parent_session_id}
            if set(children) != {"researcher", "auditor"}:
                return None
            try:
                auditor = store.turn(turn_id(children["auditor"].id, TASK_INPUT_ID))
                researcher = store.turn(turn_id(children["researcher"].id, TASK_INPUT_ID))
            except NotFound:  # created, but its turn has not started yet
                return None
            if auditor.status == "completed" and researcher.steps and researcher.steps[0]["results"]:
                return children
            return None

        children = wait_for(mid_delegation, "one child finished and the other mid-way")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    parent_id = next(s for s in store.session_ids() if not store.session(s).parent_session_id)
    assert store.session(parent_id).status == "busy", "the parent must have died mid-turn"

    path.write_text(json.dumps(script(slow_s=0)), encoding="utf-8")
    resumed = cli("resume", str(parent_id), "--json", db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    events = json_lines(resumed.stdout)
    ends = [e for e in events if e["type"] == "turn_end" and e["session_id"] == str(parent_id)]
    assert [e["status"] for e in ends] == ["completed"]
    results = {r["agent"]: r for r in json.loads(next(e for e in events if e["type"] == "tool_end" and e["name"] == "delegate")["output"])["results"]}
    assert results["researcher"] == {**results["researcher"], "status": "completed", "summary": "it says hello world",
                                     "session_id": str(children["researcher"].id)}
    assert results["auditor"] == {**results["auditor"], "status": "completed", "summary": "looks fine",
                                  "session_id": str(children["auditor"].id)}

    sessions = json_lines(cli("sessions", "--json", db=db_url).stdout)
    assert len(sessions) == 3, "resume spawned new children instead of continuing the old ones"
    log = json_lines(cli("log", str(parent_id), "--tree", "--json", db=db_url).stdout)
    steps = [(e["agent"], e["data"]["step"]) for e in log if e["event"] == "ModelResponded"]
    assert sorted(steps) == sorted([("main", 0), ("main", 1), ("researcher", 0), ("researcher", 1), ("auditor", 0)])
    researcher_events = [e["event"] for e in log if e["agent"] == "researcher" and e["aggregate"] == "turn"]
    assert "Interrupted" in researcher_events and "Resumed" in researcher_events
    auditor_events = [e["event"] for e in log if e["agent"] == "auditor" and e["aggregate"] == "turn"]
    assert "Interrupted" not in auditor_events and auditor_events.count("Completed") == 1
    runs = [e for e in log if e["aggregate"] == "tool_call" and e["event"] == "Requested" and e["data"]["name"] == "read_file"]
    assert len(runs) == 1
