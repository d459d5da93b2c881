"""A routine's findings go out through a channel (seed 001: the heartbeat "notifies via channel if
findings"), on both backends: the routine runs in another process (`routines run`), a `serve` posts
what it found to the channel's receiver once and records it, and nothing goes out when there is
nothing to report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx

from tests.helpers import cli, json_lines, response, text, write_script
from tests.recovery import wait_for
from tests.server.serving import outbox_looked_again, serving
from tests.server.test_channels import receiver

CHECKLIST = "# Checklist\n- is the build green?\n"


def _toml(script: Path, url: str, notify: bool = True, routine: str = "[routines.heartbeat]\nheartbeat = true\n") -> str:
    """A channel that only sends (its senders get sessions of their own; none writes here) and a routine."""
    return (f'[channels.ops]\nroute = "per_sender"\nprovider = "scripted:{script}"\ncoalesce_s = 0\n'
            f'reply_url = "{url}/in?token=s3cret-value"\n\n{routine}' + ('notify = "ops"\n' if notify else ""))


def _run(db: str, workspace: Path, provider: Path, name: str = "heartbeat") -> dict[str, Any]:
    ran = cli("routines", "run", name, "--provider", f"scripted:{provider}", "--workspace", str(workspace), "--json", db=db)
    assert ran.returncode in (0, 1), ran.stderr
    return json_lines(ran.stdout)[0]


def _replies(base: str, sid: str) -> list[dict[str, Any]]:
    return [a for a in httpx.get(f"{base}/sessions/{sid}/audit").json() if a["kind"] == "reply"]


def test_a_heartbeat_with_findings_posts_them_once_to_the_channel_and_records_it_and_a_restart_sends_nothing(
        db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [], **{"routine-heartbeat": [[response(text("HEARTBEAT_OK"))],
                                                                              [response(text("The build is red."))]]})
    (workspace / "HEARTBEAT.md").write_text(CHECKLIST)
    with receiver() as (url, got):
        (workspace / "chronicle.toml").write_text(_toml(script, url))
        listed = json_lines(cli("routines", "list", "--workspace", str(workspace), "--json").stdout)
        assert listed[0]["notify"] == "ops"
        assert "notify" in cli("routines", "list", "--workspace", str(workspace), env={"COLUMNS": "200"}).stdout
        quiet = _run(db_url, workspace, script)
        assert quiet["summary"] == "nothing to report" and quiet["notify"] == "ops"
        found = _run(db_url, workspace, script)
        assert found["summary"] == "The build is red."
        sid = found["session_id"]
        with serving(db_url, workspace) as base:
            wait_for(lambda: got, timeout=60)
            replies = wait_for(lambda: _replies(base, sid), timeout=60)
            outbox_looked_again(base)  # a whole pass after the findings went: the quiet run is still not posted
            assert len(got) == 1, got
            payload = got[0]["json"]
            assert payload == {"channel": "ops", "sender": None, "senders": [], "session_id": sid,
                               "turn_id": payload["turn_id"], "status": "completed", "text": "The build is red.",
                               "routine": "heartbeat"}
            assert got[0]["path"] == "/in?token=s3cret-value"
            assert len(replies) == 1 and replies[0]["status"] == "delivered" and replies[0]["turn_id"] == payload["turn_id"]
            assert replies[0]["detail"]["routine"] == "heartbeat" and replies[0]["detail"]["receiver"] == f"{url}/in?token=[REDACTED]"
            log = httpx.get(f"{base}/sessions/{sid}/log").json()
        assert [e["data"]["routine"] for e in log if e["event"] == "ReplyDelivered"] == ["heartbeat"]
        assert "s3cret-value" not in json.dumps(log) + json.dumps(replies)
        with serving(db_url, workspace) as base:  # a restart: the log says it was delivered
            outbox_looked_again(base)
        assert len(got) == 1
    shown = cli("audit", "--session", sid, db=db_url, env={"COLUMNS": "250"})
    assert "findings of routine heartbeat via ops: HTTP 200" in shown.stdout, shown.stdout
    fired = [e for e in json_lines(cli("audit", "--session", sid, "--json", db=db_url).stdout)
             if e["kind"] == "routine" and e["status"] == "fired"]
    assert [e["detail"]["notify"] for e in fired] == ["ops", "ops"]


def test_nothing_to_report_posts_nothing_and_notify_added_later_sends_no_old_findings(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [], **{"routine-heartbeat": [[response(text("The disk is full."))],
                                                                              [response(text("HEARTBEAT_OK"))]]})
    (workspace / "HEARTBEAT.md").write_text(CHECKLIST)
    with receiver() as (url, got):
        (workspace / "chronicle.toml").write_text(_toml(script, url, notify=False))
        old = _run(db_url, workspace, script)
        assert old["summary"] == "The disk is full." and old["notify"] is None
        (workspace / "chronicle.toml").write_text(_toml(script, url))  # notify named after that run fired
        quiet = _run(db_url, workspace, script)
        assert quiet["summary"] == "nothing to report" and quiet["notify"] == "ops"
        before = json_lines(cli("audit", "--json", db=db_url).stdout)
        with serving(db_url, workspace) as base:
            outbox_looked_again(base)
        assert got == [], "nothing to report, and findings of a run fired before notify was set, post nothing"
        after = json_lines(cli("audit", "--json", db=db_url).stdout)
        assert [a for a in after if a["kind"] == "reply"] == []
        assert len(after) == len(before), "nothing is recorded for a run with nothing to report"


def test_a_failed_run_is_posted_as_failed_and_a_failing_receiver_is_recorded_and_harms_nothing(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [])  # routine-check has no response: its turn fails
    with receiver(status=503) as (url, got):
        (workspace / "chronicle.toml").write_text(
            _toml(script, url, routine='[routines.check]\ntrigger = "manual"\nprompt = "Check the queue."\n'))
        failed = _run(db_url, workspace, script, "check")
        assert failed["status"] == "failed"
        sid = failed["session_id"]
        with serving(db_url, workspace) as base:
            replies = wait_for(lambda: _replies(base, sid), timeout=60)
            assert replies[0]["status"] == "failed" and replies[0]["is_error"] is True
            assert replies[0]["detail"]["http_status"] == 503 and replies[0]["detail"]["attempts"] == 3
            assert replies[0]["detail"]["routine"] == "check"
            assert len(got) == 3, "bounded: three attempts, then recorded as failed"
            assert {g["json"]["status"] for g in got} == {"failed"} and {g["json"]["text"] for g in got} == {None}
            assert httpx.get(f"{base}/healthz").status_code == 200
        with serving(db_url, workspace) as base:
            outbox_looked_again(base)
        assert len(got) == 3, "a failure is recorded once and not tried again"
    history = json_lines(cli("routines", "history", "--workspace", str(workspace), "--json", db=db_url).stdout)
    assert [h["status"] for h in history] == ["failed"], "the run is as it ended"


def test_notify_naming_an_unknown_channel_or_one_without_reply_url_exits_2_naming_the_setting(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [])
    (workspace / "HEARTBEAT.md").write_text(CHECKLIST)
    beat = "[routines.heartbeat]\nheartbeat = true\n"
    cases = {
        f'{beat}notify = "nope"\n': "routines.heartbeat: notify: no channel 'nope'",
        f'[channels.quiet]\nsession = "abc"\n\n{beat}notify = "quiet"\n': "notify: channel 'quiet' has no reply_url",
        f"{beat}notify = 5\n": "routines.heartbeat: notify must name a [channels.NAME] table",
    }
    store = Path(sqlite_url.removeprefix("sqlite:///"))
    for toml, said in cases.items():
        (workspace / "chronicle.toml").write_text(toml)
        for args in (("routines", "list"), ("routines", "run", "heartbeat", "--provider", f"scripted:{script}"),
                     ("worker", "--once")):
            refused = cli(*args, "--workspace", str(workspace), db=sqlite_url)
            assert refused.returncode == 2, (toml, args, refused.stderr)
            assert said in refused.stderr and len(refused.stderr.strip().splitlines()) == 1, (toml, args, refused.stderr)
        if store.exists():
            history = json_lines(cli("routines", "history", "--workspace", str(workspace), "--json", db=sqlite_url).stdout)
            assert history == [], "nothing recorded"


def test_an_outbound_only_channel_posts_a_heartbeats_findings_once_and_refuses_input_recording_nothing(
        db_url, workspace, tmp_path):
    """`[channels.alerts]` with only a reply_url is a channel for notifications: no session or route is needed."""
    script = write_script(tmp_path / "s.json", [], **{"routine-heartbeat": [[response(text("HEARTBEAT_OK"))],
                                                                              [response(text("The queue is stuck."))]]})
    (workspace / "HEARTBEAT.md").write_text(CHECKLIST)
    with receiver() as (url, got):
        (workspace / "chronicle.toml").write_text(
            f'[channels.alerts]\nreply_url = "{url}/in"\n\n[routines.heartbeat]\nheartbeat = true\nnotify = "alerts"\n')
        wide = {"COLUMNS": "250"}
        listed = cli("routines", "list", "--workspace", str(workspace), env=wide)
        assert listed.returncode == 0, listed.stderr
        note = f"notify: findings are posted by `chronicle serve --workspace {workspace}`"
        assert note in listed.stdout and listed.stdout.count("findings are posted by") == 1, listed.stdout
        assert "findings are posted by" not in cli("routines", "list", "--workspace", str(workspace), "--json").stdout
        quiet = cli("routines", "run", "heartbeat", "--provider", f"scripted:{script}", "--workspace", str(workspace),
                    db=db_url, env=wide)
        assert quiet.returncode == 0 and "nothing to report" in quiet.stdout, quiet.stderr
        assert note in quiet.stdout, quiet.stdout
        found = _run(db_url, workspace, script)
        assert found["summary"] == "The queue is stuck." and found["notify"] == "alerts"
        sid = found["session_id"]
        with serving(db_url, workspace) as base:
            wait_for(lambda: got, timeout=60)
            replies = wait_for(lambda: _replies(base, sid), timeout=60)
            assert replies[0]["status"] == "delivered" and replies[0]["detail"]["routine"] == "heartbeat"
            sessions = httpx.get(f"{base}/sessions").json()
            before = json_lines(cli("audit", "--json", db=db_url).stdout)
            refused = httpx.post(f"{base}/hooks/alerts", json={"text": "hello", "sender": "bob"})
            assert refused.status_code == 409, refused.text
            assert refused.json()["error"].startswith("channel alerts takes no input: it only sends notifications")
            outbox_looked_again(base)  # a whole pass after the refusal: the findings are not posted again
            assert httpx.get(f"{base}/sessions").json() == sessions, "no session was started or fed"
            assert json_lines(cli("audit", "--json", db=db_url).stdout) == before, "nothing is recorded"
        assert len(got) == 1, got
        assert got[0]["json"]["text"] == "The queue is stuck." and got[0]["json"]["channel"] == "alerts"


def test_a_channel_with_input_settings_but_no_route_is_still_refused_when_a_routine_notifies_it(sqlite_url, workspace):
    """Only a bare reply_url makes a channel outbound-only: any input setting still needs its route."""
    (workspace / "HEARTBEAT.md").write_text(CHECKLIST)
    beat = '[routines.heartbeat]\nheartbeat = true\nnotify = "out"\n'
    for setting in ("coalesce_s = 1", 'agent = "helper"', 'route = "session"'):
        (workspace / "chronicle.toml").write_text(f'[channels.out]\nreply_url = "https://x.example/in"\n{setting}\n\n{beat}')
        refused = cli("routines", "list", "--workspace", str(workspace))
        assert refused.returncode == 2, (setting, refused.stderr)
        assert '[channels.out] route = "session" (the default) needs session' in refused.stderr, (setting, refused.stderr)


def test_worker_says_once_that_it_does_not_post_the_findings_of_its_notifying_routines(db_url, workspace):
    """Only `serve` posts findings: a worker firing a notifying routine says so on stderr, one line."""
    (workspace / "chronicle.toml").write_text(
        '[channels.ops]\nreply_url = "http://127.0.0.1:9/in"\n\n'
        '[routines.report]\ntrigger = "manual"\nprompt = "Report."\nnotify = "ops"\n')
    ran = cli("worker", "--once", "--workspace", str(workspace), db=db_url)
    assert ran.returncode == 0, ran.stderr
    said = [line for line in ran.stderr.splitlines() if "does not post findings" in line]
    assert len(said) == 1 and "report" in said[0] and f"serve --workspace {workspace}" in ran.stderr, ran.stderr
