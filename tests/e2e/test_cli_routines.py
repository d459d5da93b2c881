"""Routines through the real CLI: list, a manual run and its guardrails, a job left to a worker, the
heartbeat, history and audit, and workers in two processes firing one cron slot at most once."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tests import processes
from tests.helpers import cli, json_lines, response, text

ROUTINES = """
[routines.todo_check]
trigger = "cron:*/5 * * * *"
prompt = "Check TODO.md and report what is overdue."
max_runs_per_day = 1

[routines.nightly]
trigger = "manual"
prompt = "Summarise the day."
action = "job"

[routines.heartbeat]
heartbeat = true
"""


def script(tmp_path, **agents):
    path = tmp_path / "routines.json"
    path.write_text(json.dumps({"agents": agents}), encoding="utf-8")
    return f"scripted:{path}"


def test_routines_list_shows_trigger_action_and_the_next_cron_time(workspace):
    (workspace / "chronicle.toml").write_text(ROUTINES, encoding="utf-8")
    rows = json_lines(cli("routines", "list", "--workspace", str(workspace), "--json").stdout)
    assert [(r["name"], r["trigger"], r["action"]) for r in rows] == [
        ("todo_check", "cron:*/5 * * * *", "lightweight"), ("nightly", "manual", "job"), ("heartbeat", "cron:*/30 * * * *", "lightweight"),
    ]
    assert rows[0]["next_due"].endswith(("0:00+00:00", "5:00+00:00")) and rows[1]["next_due"] is None


def test_a_bad_routine_table_is_one_line_naming_the_key_and_exit_2(workspace):
    (workspace / "chronicle.toml").write_text('[routines.x]\ntrigger = "cron:every day"\nprompt = "p"\n', encoding="utf-8")
    result = cli("routines", "list", "--workspace", str(workspace))
    assert result.returncode == 2 and "routines.x: 'every day' is not a cron expression" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    missing = cli("routines", "run", "nope", "--workspace", str(workspace), "--provider", "scripted:/dev/null")
    assert missing.returncode == 2
    for never in ("0 0 31 2 *", "* * * * * */5"):  # well formed for croniter, but never due / a sixth (seconds) field
        (workspace / "chronicle.toml").write_text(f'[routines.x]\ntrigger = "cron:{never}"\nprompt = "p"\n', encoding="utf-8")
        result = cli("routines", "list", "--workspace", str(workspace))
        assert result.returncode == 2 and f"routines.x: '{never}' is not a cron expression that ever fires" in result.stderr, result.stderr


def test_a_manual_run_completes_in_the_routines_session_and_the_daily_limit_then_skips_it(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(ROUTINES, encoding="utf-8")
    provider = script(tmp_path, **{"routine-todo_check": [[response(text("Nothing is overdue."))]]})
    first = cli("routines", "run", "todo_check", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert first.returncode == 0, first.stderr
    run = json_lines(first.stdout)[0]
    assert run == {**run, "routine": "todo_check", "status": "completed", "summary": "Nothing is overdue."}

    second = cli("routines", "run", "todo_check", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert second.returncode == 4
    skipped = json_lines(second.stdout)[0]
    assert skipped["status"] == "skipped" and skipped["session_id"] is None
    assert skipped["reason"] == "max_runs_per_day reached: 1 run(s) today, the limit is 1"

    history = json_lines(cli("routines", "history", "--workspace", str(workspace), "--json", db=db_url).stdout)
    assert [(h["routine"], h["status"]) for h in history] == [("todo_check", "completed"), ("todo_check", "skipped")]
    unknown = cli("routines", "history", "--routine", "nosuch", "--workspace", str(workspace), db=db_url)
    assert unknown.returncode == 2 and "no routine named 'nosuch'" in unknown.stderr and "todo_check" in unknown.stderr, unknown.stderr
    never = cli("routines", "history", "--routine", "nightly", "--workspace", str(workspace), db=db_url)
    assert never.returncode == 0 and never.stdout.strip() == "routine nightly has not fired yet", never.stdout
    audit = json_lines(cli("audit", "--session", run["session_id"], "--json", db=db_url).stdout)
    assert [e["status"] for e in audit if e["kind"] == "routine"] == ["fired", "completed"]
    assert next(e for e in audit if e["kind"] == "input")["status"] == "routine"
    log = json_lines(cli("audit", "--json", db=db_url).stdout)
    assert any(e["kind"] == "routine" and e["status"] == "skipped" and "max_runs_per_day" in e["detail"]["reason"] for e in log)


def test_a_job_routine_is_queued_as_its_own_session_and_a_worker_runs_it(db_url, workspace, tmp_path):
    # Only the manual routine: the worker also fires cron slots due within a minute of its start, so with the
    # cron routines configured this test would see an extra run whenever it ran just after a */5 slot.
    nightly = ROUTINES[ROUTINES.index("[routines.nightly]"):ROUTINES.index("[routines.heartbeat]")]
    (workspace / "chronicle.toml").write_text(nightly, encoding="utf-8")
    provider = script(tmp_path, **{"routine-nightly": [[response(text("A quiet day."))]]})
    queued = cli("routines", "run", "nightly", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert queued.returncode == 0, queued.stderr
    row = json_lines(queued.stdout)[0]
    assert row["status"] == "queued" and row["session_id"]
    worked = cli("worker", "--once", "--provider", provider, "--workspace", str(workspace), db=db_url)
    assert worked.returncode == 0, worked.stderr
    history = json_lines(cli("routines", "history", "--workspace", str(workspace), "--json", db=db_url).stdout)
    assert [(h["session_id"], h["status"], h["summary"]) for h in history] == [(row["session_id"], "completed", "A quiet day.")], history


def test_the_heartbeat_reads_heartbeat_md_and_is_skipped_while_it_has_nothing_to_check(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(ROUTINES, encoding="utf-8")
    provider = script(tmp_path, **{"routine-heartbeat": [[response(text("HEARTBEAT_OK"))], [response(text("The build is red."))]]})
    (workspace / "HEARTBEAT.md").write_text("# Checklist\n\n", encoding="utf-8")
    empty = cli("routines", "run", "heartbeat", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert empty.returncode == 4 and "HEARTBEAT.md" in json_lines(empty.stdout)[0]["reason"]
    (workspace / "HEARTBEAT.md").write_text("# Checklist\n- is the build green?\n", encoding="utf-8")
    ok = cli("routines", "run", "heartbeat", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert ok.returncode == 0, ok.stderr
    row = json_lines(ok.stdout)[0]
    assert row["status"] == "completed" and row["summary"] == "nothing to report"
    audit = json_lines(cli("audit", "--session", row["session_id"], "--json", db=db_url).stdout)
    prompt = next(e for e in audit if e["kind"] == "input")["detail"]["text"]
    assert "<heartbeat_checklist>" in prompt and "is the build green?" in prompt

    again = cli("routines", "run", "heartbeat", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert again.returncode == 0, again.stderr
    second = json_lines(again.stdout)[0]
    assert second["session_id"] == row["session_id"], "a lightweight routine reports to its one session"
    assert second["summary"] == "The build is red."


def test_two_worker_processes_fire_each_cron_slot_at_most_once(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text('[routines.tick]\ntrigger = "cron:* * * * *"\nprompt = "tick"\n', encoding="utf-8")
    provider = script(tmp_path, **{"routine-tick": [[response(text("tock"))], [response(text("tock"))], [response(text("tock"))]]})
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY",)}
    env["CHRONICLE_DB"] = db_url
    command = [sys.executable, "-m", "chronicle.runtime.cli", "worker", "--once", "--provider", provider, "--workspace", str(workspace)]
    workers = [processes.start(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    logs = [w.communicate(timeout=120)[1] for w in workers]
    assert all(w.returncode == 0 for w in workers), logs
    history = json_lines(cli("routines", "history", "--workspace", str(workspace), "--json", db=db_url).stdout)
    dues = [h["due"] for h in history]
    assert dues and len(dues) == len(set(dues)), f"a slot fired twice: {dues}"
    # Counted per firing, not per worker: a run that crosses a minute boundary fires two slots, and
    # one worker may fire both.
    assert sum(log.count("routine tick fired") for log in logs) == len(dues)


def test_an_unknown_routine_or_server_in_a_workspace_without_chronicle_toml_says_there_is_none(sqlite_url, tmp_path):
    """They named `WS/chronicle.toml` as where the name was looked for, a file that does not exist."""
    bare = tmp_path / "bare"
    bare.mkdir()
    routine = cli("routines", "run", "nope", "--workspace", str(bare), db=sqlite_url)
    assert routine.returncode == 2 and f"in {bare} (it has no chronicle.toml to define [routines.NAME] in)" in routine.stderr
    server = cli("mcp", "list", "--server", "nope", "--workspace", str(bare))
    assert server.returncode == 2 and f"in {bare} (it has no chronicle.toml to define [mcp.NAME] in)" in server.stderr
