"""A sub-agent paused for an approval leaves its task `in_progress` (its parent's delegate call reported it
failed and the parent went on); approved and resumed on its own session — through the library, the CLI or a
worker — its finished task turn settles that task from its report, as the delegate call would have."""

from __future__ import annotations

import json
from pathlib import Path

from chronicle import Agent, Chronicle, tool
from tests.e2e.test_cli_subagents import complete, delegate
from tests.helpers import cli, response, text, tool_use


@tool(requires_approval=True)
def stamp(what: str) -> str:
    """Stamp something.

    Args:
        what: The thing to stamp.
    """
    return f"stamped {what}"


def paused_child(db_url: str, tmp_path: Path, workspace: Path, report: dict) -> tuple[Agent, str, str]:  # type: ignore[type-arg]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agents": {
        "lead": [response(delegate("d1", ("clerk", "stamp the summary"))), response(text("lead done"))],
        "clerk": [response(tool_use("c1", "stamp", what="summary")), response(report)],
    }}), encoding="utf-8")
    clerk = Agent(name="clerk", description="stamps things", tools=[stamp])
    lead = Agent(name="lead", tools=["read_file"], agents=[clerk], provider=f"scripted:{script}")
    with Chronicle(db_url) as app:
        ran = app.run_sync(lead, "go", workspace=workspace)
        assert ran.status == "completed"
        child = next(s for s in app.sessions() if s["parent_session_id"] == ran.session_id)
        assert child["status"] == "awaiting_approval"
        assert [(t["agent"], t["status"]) for t in app.tasks(ran.session_id)] == [("clerk", "in_progress")]
    return lead, ran.session_id, child["session_id"]


def test_a_sub_agent_approved_and_resumed_through_the_library_settles_its_task(db_url, tmp_path, workspace):
    lead, parent, child = paused_child(db_url, tmp_path, workspace, complete("c2", "stamped it"))
    with Chronicle(db_url) as app:
        app.approve(child)
        assert app.resume(child, workspace=workspace).status == "completed"
        [task] = app.tasks(parent)
    assert (task["agent"], task["status"], task["summary"]) == ("clerk", "completed", "stamped it")


def test_a_sub_agent_resumed_by_the_cli_settles_a_failed_report_as_failed(db_url, tmp_path, workspace):
    lead, parent, child = paused_child(db_url, tmp_path, workspace, complete("c2", "could not stamp", status="failed"))
    approved = cli("approve", child, db=db_url)
    assert approved.returncode == 0, approved.stderr
    resumed = cli("resume", child, db=db_url, cwd=tmp_path)
    assert resumed.returncode in (0, 1), resumed.stderr
    with Chronicle(db_url) as app:
        [task] = app.tasks(parent)
    assert (task["status"], task["summary"]) == ("failed", "could not stamp")
