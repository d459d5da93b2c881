"""Routines whose session `chronicle forget` erased, through the real CLI on both backends: the erased runs stay in
`routines history` as `erased` (ids and times only), and a lightweight routine whose kept session was erased starts
its session anew at its next run, said so in the run, `routines history`, the worker's log and `audit`, where it
failed every run (`routines run` exit 1, the worker's whole routine tick) on the erased session."""

from __future__ import annotations

import base64
import json
import os

import pytest

from tests.helpers import cli, json_lines, response, text

TOML = '[routines.tick]\ntrigger = "cron:* * * * *"\nprompt = "Look at the queue."\n'


@pytest.fixture
def env() -> dict[str, str]:
    """Encryption at rest from the store's creation: only then can a session be forgotten."""
    return {"CHRONICLE_CIPHER_KEY": base64.b64encode(os.urandom(32)).decode()}


def _provider(tmp_path) -> str:
    turns = [[response(text(f"FINDING-{n}"))] for n in range(1, 6)]
    path = tmp_path / "routines.json"
    path.write_text(json.dumps({"agents": {"routine-tick": turns}}), encoding="utf-8")
    return f"scripted:{path}"


def _history(db_url, workspace, env) -> list[dict]:
    shown = cli("routines", "history", "--workspace", str(workspace), "--json", db=db_url, env=env)
    assert shown.returncode == 0, shown.stderr
    return json_lines(shown.stdout)


def test_an_erased_run_stays_in_routines_history_as_erased_without_its_content(db_url, workspace, tmp_path, env):
    (workspace / "chronicle.toml").write_text(TOML, encoding="utf-8")
    ran = cli("routines", "run", "tick", "--provider", _provider(tmp_path), "--workspace", str(workspace), "--json",
              db=db_url, env=env)
    assert ran.returncode == 0, ran.stderr
    run = json_lines(ran.stdout)[0]
    assert (run["status"], run["summary"], run["erased_at"]) == ("completed", "FINDING-1", None)
    forgot = cli("forget", run["session_id"], "--yes", "--json", db=db_url, env=env)
    assert forgot.returncode == 0, forgot.stderr
    forgotten_at = json_lines(forgot.stdout)[0]["forgotten_at"]

    [erased] = _history(db_url, workspace, env)
    assert erased["status"] == "erased" and erased["erased_at"] == forgotten_at
    assert (erased["routine"], erased["run_id"], erased["session_id"]) == ("tick", run["run_id"], run["session_id"])
    assert erased["fired_at"][:16] == run["fired_at"][:16]
    assert (erased["summary"], erased["due"], erased["trigger"], erased["usd"]) == ("", None, None, None)
    assert set(run) <= set(erased), "the same fields as every row"
    assert "FINDING-1" not in json.dumps(erased)
    table = cli("routines", "history", "--workspace", str(workspace), db=db_url, env=env)
    assert table.returncode == 0, table.stderr
    assert "erased" in table.stdout and run["session_id"][:8] in table.stdout and "no routine has fired" not in table.stdout
    only = cli("routines", "history", "--routine", "tick", "--workspace", str(workspace), "--json", db=db_url, env=env)
    assert [r["status"] for r in json_lines(only.stdout)] == ["erased"]


def test_a_lightweight_routine_whose_session_was_erased_starts_its_session_anew(db_url, workspace, tmp_path, env):
    (workspace / "chronicle.toml").write_text(TOML, encoding="utf-8")
    provider = _provider(tmp_path)
    args = ("--provider", provider, "--workspace", str(workspace))
    first = json_lines(cli("routines", "run", "tick", *args, "--json", db=db_url, env=env).stdout)[0]
    old = first["session_id"]
    assert cli("forget", old, "--yes", db=db_url, env=env).returncode == 0

    again = cli("routines", "run", "tick", *args, "--json", db=db_url, env=env)
    assert again.returncode == 0, again.stderr
    second = json_lines(again.stdout)[0]
    assert second["status"] == "completed" and second["summary"] == "FINDING-1", "its first turn in a new session"
    assert second["session_id"] not in (None, old) and second["replaces_session_id"] == old

    # A worker fires the cron slot into the new session, never into the erased one, and settles it.
    worked = cli("worker", "--once", *args, db=db_url, env=env)
    assert worked.returncode == 0, worked.stderr
    assert "routines not fired" not in worked.stderr, worked.stderr
    assert f"session {second['session_id']}" in worked.stderr

    history = _history(db_url, workspace, env)
    # (a worker run that crosses a minute boundary fires the next slot too: one row more, the same)
    assert [(h["status"], h["session_id"], h["replaces_session_id"]) for h in history[:3]] == [
        ("erased", old, None), ("completed", second["session_id"], old), ("completed", second["session_id"], None),
    ]
    assert history[2]["due"].startswith("cron/") and history[2]["summary"] == "FINDING-2"
    assert all((h["session_id"], h["replaces_session_id"]) == (second["session_id"], None) for h in history[3:])

    text_run = cli("routines", "run", "tick", *args, db=db_url, env=env)
    assert text_run.returncode == 0, text_run.stderr
    assert f"session {second['session_id']}" in text_run.stdout and "erased" not in text_run.stdout, "only the run that replaced it says so"
    table = cli("routines", "history", "--workspace", str(workspace), db=db_url, env=env).stdout
    assert f"new session: {old[:8]} was erased" in table

    audit = json_lines(cli("audit", "--session", second["session_id"], "--json", db=db_url, env=env).stdout)
    fired = [e for e in audit if e["kind"] == "routine" and e["status"] == "fired"]
    assert [e["detail"].get("replaces_session_id") for e in fired] == [old] + [None] * (len(fired) - 1)
    said = cli("audit", "--session", second["session_id"], db=db_url, env=env).stdout
    assert f"new session: the routine's session {old} was erased" in said, said


def test_a_worker_fires_a_lightweight_routine_whose_session_was_erased_into_a_new_one(db_url, workspace, tmp_path, env):
    """The worker alone: its routine tick failed at every look (every routine of the workspace with it)."""
    (workspace / "chronicle.toml").write_text(TOML, encoding="utf-8")
    args = ("--provider", _provider(tmp_path), "--workspace", str(workspace))
    first = json_lines(cli("routines", "run", "tick", *args, "--json", db=db_url, env=env).stdout)[0]
    assert cli("forget", first["session_id"], "--yes", db=db_url, env=env).returncode == 0
    worked = cli("worker", "--once", *args, db=db_url, env=env)
    assert worked.returncode == 0, worked.stderr
    assert "routines not fired" not in worked.stderr and "was erased" in worked.stderr, worked.stderr
    history = _history(db_url, workspace, env)
    assert [h["status"] for h in history[:2]] == ["erased", "completed"] and {h["status"] for h in history[2:]} <= {"completed"}
    assert history[1]["replaces_session_id"] == first["session_id"] and history[1]["session_id"] != first["session_id"]


def test_an_erased_run_still_counts_for_the_daily_limit(db_url, workspace, tmp_path, env):
    """Erasing the content does not give back the runs it used: the run ran (a skipped run names no session, so
    none is ever erased), and max_runs_per_day counts it, where the guard passed it by and ran the routine again."""
    (workspace / "chronicle.toml").write_text(TOML + "max_runs_per_day = 1\n", encoding="utf-8")
    args = ("--provider", _provider(tmp_path), "--workspace", str(workspace), "--json")
    first = json_lines(cli("routines", "run", "tick", *args, db=db_url, env=env).stdout)[0]
    assert first["status"] == "completed"
    assert cli("forget", first["session_id"], "--yes", db=db_url, env=env).returncode == 0
    again = cli("routines", "run", "tick", *args, db=db_url, env=env)
    assert again.returncode == 4, again.stdout + again.stderr
    skipped = json_lines(again.stdout)[0]
    assert skipped["status"] == "skipped" and skipped["reason"] == "max_runs_per_day reached: 1 run(s) today, the limit is 1"
    assert [h["status"] for h in _history(db_url, workspace, env)] == ["erased", "skipped"]
