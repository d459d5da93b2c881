"""What a person or a caller types besides a prompt (a denial's reason, who they say they are, a task posted
on a board) is scanned as a prompt is: stored and shown as `[REDACTED:kind]`, with a SecretsRedacted count."""

from __future__ import annotations

import json

from chronicle import Agent, Chronicle
from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.store_dump import dump_store, holds

# Built from parts, so that no scanner of this repository's files trips over them.
TOKEN = "ghp_" + "abcdefghijklmnopqrstuvwxyz0123456789"
PASSWORD = "Hunter22" + "Secret!"
TASK_PASSWORD = "TaskSecret" + "99!"
REGISTRY = """
[agents.researcher]
description = "Reads files and reports"
"""


def redacted_counts(app: Chronicle, sid: str) -> list[tuple[str, dict[str, int]]]:
    """What audit lists as cut out: where, and how many of each kind (never the secret)."""
    return [(row["detail"]["where"], row["detail"]["counts"]) for row in app.audit(session=sid) if row["kind"] == "secrets_redacted"]


def test_a_denials_reason_and_the_deciders_name_are_scanned_before_they_are_recorded(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(tool_use("tu_1", "bash", command="echo hi")), response(text("As you say."))])
    app = Chronicle(db_url)
    paused = app.run_sync(Agent(tools=["bash"], provider=f"scripted:{script}"), "run it", workspace=workspace)
    assert paused.status == "awaiting_approval"
    sid = paused.session_id
    reason = f"use password={PASSWORD} and token {TOKEN}"
    assert app.deny(sid, reason=reason, actor=f"eve token={TOKEN}")[0]["status"] == "denied"
    assert app.resume(sid).text == "As you say."

    dump = dump_store(db_url)
    assert holds(dump, "[REDACTED:github-token]"), "the dump holds the events (the check below could fail)"
    assert not holds(dump, PASSWORD) and not holds(dump, TOKEN)
    denial = next(row for row in app.audit(session=sid) if row["kind"] == "approval")  # a decision, this one a denial
    assert denial["detail"]["reason"] == "use password=[REDACTED:assigned-secret] and token [REDACTED:github-token]"
    assert denial["detail"]["actor"] == "eve token=[REDACTED:github-token]"
    assert ("denial reason", {"assigned-secret": 1, "github-token": 1}) in redacted_counts(app, sid)
    told = json.dumps(app.history(sid))  # the tool result the model read on resume is the recorded reason
    assert "[REDACTED:assigned-secret]" in told and PASSWORD not in told and TOKEN not in told
    app.close()


def test_deny_reason_from_the_cli_and_a_task_posted_on_a_board_never_reach_the_store(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    script = write_script(tmp_path / "s.json", [response(tool_use("tu_1", "bash", command="echo hi")), response(text("ok"))])
    started = cli("run", "run it", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    sid = json_lines(started.stdout)[0]["session_id"]
    denied = cli("deny", sid, "--reason", f"use password={PASSWORD} and token {TOKEN}", db=db_url,
                 env={"CHRONICLE_ACTOR": f"ci-bot {TOKEN}"})
    assert denied.returncode == 0, denied.stderr
    posted = cli("tasks", "add", sid, f"log in with password={TASK_PASSWORD} then {TOKEN}", "--json", db=db_url)
    assert posted.returncode == 0, posted.stderr
    assert json_lines(posted.stdout)[0]["task"] == "log in with password=[REDACTED:assigned-secret] then [REDACTED:github-token]"

    shown = "".join(cli(*command, db=db_url).stdout for command in (("history", sid), ("why", sid), ("audit", "--session", sid),
                                                                    ("tasks", sid)))
    assert "[REDACTED:github-token]" in shown
    for secret in (PASSWORD, TOKEN, TASK_PASSWORD):
        assert secret not in shown
        assert not holds(dump_store(db_url), secret)
    app = Chronicle(db_url)
    counts = redacted_counts(app, sid)
    assert ("denial reason", {"assigned-secret": 1, "github-token": 1}) in counts
    task_id = json_lines(posted.stdout)[0]["task_id"]
    assert (f"task {task_id}", {"assigned-secret": 1, "github-token": 1}) in counts
    assert "ci-bot [REDACTED:github-token]" in [row["detail"].get("actor") for row in app.audit(session=sid)]
    app.close()
