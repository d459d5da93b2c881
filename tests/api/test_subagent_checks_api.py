"""A sub-agent's own guardrails and middleware (`Agent(name=..., guardrails=..., middleware=...)` given to
its parent as `agents=[...]`) apply when it runs: after its parent's checks, in the live process, in a
`chronicle resume` in another process, and after a crash mid-task; what it reports to its parent has
passed its checks too."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chronicle import Agent, Chronicle, ChronicleError, Guardrail, Middleware, Rejected
from chronicle.domain.ids import turn_id
from chronicle.runtime.agents.children import TASK_INPUT_ID
from chronicle.runtime.store import ChronicleStore, NotFound
from tests import processes
from tests.e2e.test_cli_subagents import complete, delegate
from tests.helpers import cli, json_lines, recorded_sessions, response, text, tool_use

ROOT = Path(__file__).resolve().parents[2]


def redact(text: str, where: str) -> str | None:
    return text.replace("hunter2", "[redacted]") if "hunter2" in text else None


def no_secrets(text: str, where: str) -> None:
    if "hunter2" in text:
        raise Rejected("names the secret")


def by_lead(text: str, where: str) -> str:
    return text + " +lead"


def by_reader(text: str, where: str) -> str:
    return text + " +reader"


def by_reader_same_name(text: str, where: str) -> str:
    return text + " +reader-as-lead"


async def stamp(run, call_next):
    run.record("stamped", agent=run.agent)
    return await call_next()


def reader(**checks) -> Agent:
    return Agent(name="reader", description="reads files", tools=["read_file"], **checks)


def lead(provider: str, sub: Agent, **checks) -> Agent:
    return Agent(name="lead", tools=["read_file"], agents=[sub], provider=provider, **checks)


def scripted(tmp_path, *, reader_delay_s: float = 0.0) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {
        "lead": [response(delegate("d1", ("reader", "read secret.txt"))), response(text("lead is done"))],
        "reader": [response(tool_use("r1", "read_file", path="secret.txt")),
                   response(tool_use("r2", "read_file", path="secret.txt"), delay_s=reader_delay_s),
                   response(complete("r3", "the secret is hunter2", caveats="hunter2 may be old"))],
    }}), encoding="utf-8")
    return f"scripted:{path}"


def reports(entries: list[dict]) -> list[dict]:
    """What the lead received from its delegate call."""
    [done] = [e for e in entries if e["aggregate"] == "tool_call" and e["event"] == "Completed" and e["data"]["name"] == "delegate"]
    return json.loads(done["data"]["output"])["results"]


def reader_reads(entries: list[dict]) -> list[str]:
    return [e["data"]["output"] for e in entries
            if e["aggregate"] == "tool_call" and e["event"] == "Completed" and e["data"]["name"] == "read_file"]


def assert_reader_ran_under_its_checks(app: Chronicle, sid: str) -> None:
    entries = app.log(sid, tree=True)
    assert reader_reads(entries) == ["pw: [redacted]", "pw: [redacted]"]
    [report] = reports(entries)
    assert (report["status"], report["summary"], report["caveats"]) == ("completed", "the secret is [redacted]", "[redacted] may be old")
    child = report["session_id"]
    results = [e["data"] for e in app.log(child) if e["aggregate"] == "tool_call" and e["event"] == "Completed"]
    assert "hunter2" not in json.dumps(results), "the original tool result never reaches the store"
    marks = [m for r in results for m in (r.get("effects") or [])]
    assert [(m["guardrail"], m["where"], m["action"]) for m in marks] == [("redact", "tool_result", "modified")] * 2
    rows = [(r["kind"], r["name"], r["status"], r["detail"]) for r in app.audit(session=child) if r["kind"] == "middleware"]
    assert ("middleware", "stamp", "stamped", {"agent": "reader"}) in rows
    [delegated] = [e["data"] for e in entries if e["aggregate"] == "tool_call" and e["event"] == "Completed" and e["data"]["name"] == "delegate"]
    assert [(m["guardrail"], m["where"], m["agent"], m["field"]) for m in delegated["effects"]] == [
        ("redact", "final", "reader", "summary"), ("redact", "final", "reader", "caveats")]
    holding = sorted({(e["aggregate"], e["event"]) for e in entries if "hunter2" in json.dumps(e["data"])})
    assert holding == [("tool_call", "Requested"), ("turn", "ModelResponded")], \
        "only the reader's model response and the task_complete call it asked for, recorded verbatim, hold the secret"


def test_a_sub_agents_own_guardrail_and_middleware_apply_to_its_run_and_its_report(db_url, workspace, tmp_path):
    (workspace / "secret.txt").write_text("pw: hunter2\n", encoding="utf-8")
    agent = lead(scripted(tmp_path), reader(guardrails=[Guardrail("redact", redact)], middleware=[stamp]))
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "what is the secret?", workspace=workspace)
        assert (result.status, result.text) == ("completed", "lead is done")
        assert_reader_ran_under_its_checks(app, result.session_id)


def test_a_sub_agent_runs_its_parents_checks_first_then_its_own_and_not_one_named_like_its_parents(db_url, workspace, tmp_path):
    (workspace / "secret.txt").write_text("pw", encoding="utf-8")
    sub = reader(guardrails=[Guardrail("tag", by_reader_same_name, on=["tool_result"]), Guardrail("mine", by_reader, on=["tool_result"])])
    agent = lead(scripted(tmp_path), sub, guardrails=[Guardrail("tag", by_lead, on=["tool_result"])])
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "read it", workspace=workspace)
        assert result.status == "completed"
        entries = app.log(result.session_id, tree=True)
    assert reader_reads(entries) == ["pw +lead +reader", "pw +lead +reader"]
    [delegated] = [e for e in entries if e["aggregate"] == "tool_call" and e["event"] == "Completed" and e["data"]["name"] == "delegate"]
    assert delegated["data"]["output"].endswith(" +lead"), "the lead's own tool result passes only the lead's checks"
    assert not delegated["data"]["output"].endswith("+reader +lead")


def test_a_report_a_sub_agents_check_rejects_reaches_its_parent_as_a_failure(db_url, workspace, tmp_path):
    (workspace / "secret.txt").write_text("pw: hunter2\n", encoding="utf-8")
    agent = lead(scripted(tmp_path), reader(guardrails=[Guardrail("no_secrets", no_secrets, on=["final"])]))
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "what is the secret?", workspace=workspace)
        assert result.status == "completed"
        [report] = reports(app.log(result.session_id, tree=True))
    assert (report["status"], report["summary"], report["caveats"]) == (
        "failed", "the sub-agent failed: guardrail no_secrets rejected the final answer: names the secret", None)


def test_a_sub_agents_check_or_middleware_that_does_not_load_is_refused_before_anything_is_recorded(db_url, workspace, tmp_path):
    broken = [reader(guardrails=[Guardrail("gone", "tests.api.nowhere:check")]), reader(middleware=[Middleware("gone", "tests.api.nowhere:mw")])]
    with Chronicle(db_url) as app:
        for sub in broken:
            with pytest.raises(ChronicleError) as raised:
                app.run_sync(lead(scripted(tmp_path), sub), "read it", workspace=workspace)
            assert raised.value.code == 2
            assert "tests.api.nowhere" in str(raised.value)
        assert recorded_sessions(app) == []


def test_a_sub_agents_checks_apply_when_chronicle_resume_runs_it_in_another_process(db_url, workspace, tmp_path):
    (workspace / "secret.txt").write_text("pw: hunter2\n", encoding="utf-8")
    agent = lead(scripted(tmp_path), reader(guardrails=[Guardrail("redact", redact)], middleware=[stamp]))
    with Chronicle(db_url) as app:
        sid = app.submit(agent, "what is the secret?", workspace=workspace)["session_id"]
    done = cli("resume", sid, "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    assert [e["status"] for e in json_lines(done.stdout) if e["type"] == "turn_end" and e["session_id"] == sid] == ["completed"]
    with Chronicle(db_url) as app:
        assert_reader_ran_under_its_checks(app, sid)


def test_a_sub_agent_resumed_after_a_crash_mid_task_still_runs_under_its_checks(db_url, workspace, tmp_path):
    (workspace / "secret.txt").write_text("pw: hunter2\n", encoding="utf-8")
    provider = scripted(tmp_path, reader_delay_s=60)
    agent = lead(provider, reader(guardrails=[Guardrail("redact", redact)], middleware=[stamp]))
    with Chronicle(db_url) as app:
        sid = app.submit(agent, "what is the secret?", workspace=workspace)["session_id"]
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env["CHRONICLE_DB"] = db_url
    proc = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "resume", sid, "--json"], cwd=ROOT, env=env,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    store = ChronicleStore(db_url)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert time.monotonic() < deadline, "the reader never read the file"
            children = [s for s in (store.session(i) for i in store.session_ids()) if s.parent_session_id]
            try:
                task = store.turn(turn_id(children[0].id, TASK_INPUT_ID)) if children else None
            except NotFound:
                task = None
            if task is not None and task.steps and task.steps[0]["results"]:
                break
            time.sleep(0.05)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        store.close()
    scripted(tmp_path)  # the same script, without the delay
    done = cli("resume", sid, "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    with Chronicle(db_url) as app:
        assert_reader_ran_under_its_checks(app, sid)


def test_a_sub_agent_resumed_on_its_own_after_an_approval_runs_under_its_parents_checks(db_url, workspace, tmp_path):
    (workspace / "secret.txt").write_text("pw: hunter2\n", encoding="utf-8")
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {
        "lead": [response(delegate("d1", ("reader", "read secret.txt"))), response(text("lead is done"))],
        "reader": [response(tool_use("r1", "bash", command="cat secret.txt")), response(complete("r2", "done"))],
    }}), encoding="utf-8")
    sub = Agent(name="reader", tools=["bash"], guardrails=[Guardrail("mine", by_reader, on=["tool_result"])])
    agent = lead(f"scripted:{path}", sub, guardrails=[Guardrail("redact", redact, on=["tool_result"])])
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "what is the secret?", workspace=workspace)
        [report] = reports(app.log(result.session_id, tree=True))
        assert report["status"] == "failed" and "waiting for a tool approval" in report["summary"]
        child = report["session_id"]
        app.approve(child)
        resumed = app.resume(child)
        assert resumed.status == "completed"
        [ran] = [e["data"] for e in app.log(child) if e["aggregate"] == "tool_call" and e["event"] == "Completed" and e["data"]["name"] == "bash"]
    assert "hunter2" not in ran["output"] and ran["output"].endswith(" +reader")
    assert "pw: [redacted]" in ran["output"]
