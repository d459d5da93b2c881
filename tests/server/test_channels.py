"""Input channels as the seeds describe them, driven over real HTTP on both backends: who sent each
input is recorded and shown, each sender may have a session of its own that a restart still finds,
and a turn's answer goes back out to the channel's receiver, recorded, without touching the turn."""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Iterator

import httpx

from tests.helpers import cli, json_lines, response, text, write_script
from tests.recovery import wait_for
from tests.server.serving import free_port, outbox_looked_again, serving


@contextmanager
def receiver(status: int = 200, delay_s: float = 0.0) -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A loopback HTTP receiver: every POST's JSON body (and its path) is kept; each is answered `status`,
    after `delay_s` (a delivery long enough for a second server to find the same reply due meanwhile)."""
    got: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            got.append({"path": self.path, "json": json.loads(body), "at": time.monotonic()})
            time.sleep(delay_s)
            self.send_response(status)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", got
    finally:
        server.shutdown()
        server.server_close()


def _started(db: str, workspace: Any, script: Any) -> str:
    first = cli("run", "start", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db)
    assert first.returncode == 0, first.stderr
    return str(json_lines(first.stdout)[0]["session_id"])


def test_each_input_records_its_channel_and_sender_and_log_history_and_audit_say_who_asked(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(text("first"))], [response(text("for alice"))],
                                                [response(text("for the phone"))], [response(text("for the token"))]])
    sid = _started(db_url, workspace, script)
    (workspace / "chronicle.toml").write_text(f'[channels.signal]\nsession = "{sid[:8]}"\ncoalesce_s = 0\n')
    token = "ghp_" + "Ab1Cd2Ef3Gh4Ij5Kl6Mn7Op8Qr9St0Uv1Wx2"
    with serving(db_url, workspace) as base:
        for sender, said in (("alice@example.com", "hello"), ("+15551234567", "call me"), (token, "sneaky")):
            accepted = httpx.post(f"{base}/hooks/signal", json={"text": said, "from": sender})
            assert accepted.status_code == 202, accepted.text
            assert accepted.json()["session_id"] == sid and accepted.json()["route"] == "session"
        wait_for(lambda: httpx.get(f"{base}/sessions").json()[0]["status"] == "idle"
                  and len([e for e in httpx.get(f"{base}/sessions/{sid}/log").json() if e["event"] == "TurnStarted"]) == 4, timeout=60)
        log = httpx.get(f"{base}/sessions/{sid}/log").json()
        origins = [e["data"]["origin"] for e in log if e["event"] == "InputQueued"]
        assert origins[0] is None, "an input given to the session itself has no channel"
        assert [o["senders"] for o in origins[1:]] == [["alice@example.com"], ["+15551234567"], ["[REDACTED:github-token]"]]
        assert {o["channel"] for o in origins[1:]} == {"signal"}
        audit = httpx.get(f"{base}/sessions/{sid}/audit").json()
        inputs = [a for a in audit if a["kind"] == "input"]
        assert inputs[1]["detail"]["senders"] == ["alice@example.com"] and inputs[1]["detail"]["channel"] == "signal"
        assert inputs[1]["name"] == "signal"
        page = httpx.get(f"{base}/ui/sessions/{sid}", headers={"Accept": "text/html"})
        assert "user · from alice@example.com via signal" in page.text, "the viewer's bubble says who asked"
    everything = json.dumps(log) + json.dumps(audit)
    assert token not in everything, "a sender that is a credential is never recorded in the clear"
    redacted = [a for a in audit if a["kind"] == "secrets_redacted"]
    assert redacted and redacted[-1]["detail"]["counts"] == {"github-token": 1}

    shown = cli("audit", "--session", sid, db=db_url, env={"COLUMNS": "250"})
    assert "from alice@example.com via signal: hello" in shown.stdout, shown.stdout
    logged = cli("log", sid, db=db_url, env={"COLUMNS": "250"})
    assert "from +15551234567 via signal: call me" in logged.stdout, logged.stdout
    history = cli("history", sid, "--no-pager", db=db_url, env={"COLUMNS": "250"})
    assert "user · from alice@example.com via signal" in history.stdout, history.stdout
    assert history.stdout.count("via signal") == 3, "the session's own first input names no channel"
    assert "## user · from +15551234567 via signal" in cli("history", sid, "--format", "md", db=db_url).stdout
    assert "<h2>user · from alice@example.com via signal</h2>" in cli("history", sid, "--format", "html", db=db_url).stdout
    wire = json_lines(cli("history", sid, "--json", db=db_url).stdout)
    assert all(set(m) == {"role", "content"} for m in wire), "history --json stays what the model reads"


def test_per_sender_routing_gives_each_sender_a_session_of_its_own_and_a_restart_keeps_it(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [], helper=[[response(text("hi"))], [response(text("again"))]])
    (workspace / "chronicle.toml").write_text(
        '[agents.helper]\ndescription = "Answers senders"\n\n'
        f'[channels.signal]\nroute = "per_sender"\nagent = "helper"\nprovider = "scripted:{script}"\ncoalesce_s = 0\n')
    with serving(db_url, workspace) as base:
        alice = httpx.post(f"{base}/hooks/signal", json={"text": "hello", "sender": "alice"})
        bob = httpx.post(f"{base}/hooks/signal", json={"text": "hello", "sender": "bob"})
        assert alice.status_code == bob.status_code == 202, alice.text + bob.text
        assert alice.json()["route"] == "per_sender" and alice.json()["sender"] == "alice"
        first = alice.json()["session_id"]
        assert bob.json()["session_id"] != first
        listed = httpx.get(f"{base}/sessions").json()
        assert sorted(s["session_id"] for s in listed) == sorted([first, bob.json()["session_id"]])
        assert {s["agent"] for s in listed} == {"helper"}, listed
    with serving(db_url, workspace) as base:  # a new process: nothing remembered but the store
        again = httpx.post(f"{base}/hooks/signal", json={"text": "me again", "sender": "alice"})
        assert again.status_code == 202 and again.json()["session_id"] == first
        wait_for(lambda: [e["data"]["text"] for e in httpx.get(f"{base}/sessions/{first}/log").json()
                           if e["event"] == "InputQueued"] == ["hello", "me again"], timeout=60)
        assert len(httpx.get(f"{base}/sessions").json()) == 2
        log = httpx.get(f"{base}/sessions/{first}/log").json()
        assert [e["data"]["origin"]["senders"] for e in log if e["event"] == "InputQueued"] == [["alice"], ["alice"]]


def test_a_turn_a_channel_started_posts_its_answer_to_the_receiver_once_and_records_it(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(text("first"))], [response(text("disk is fine"))]])
    sid = _started(db_url, workspace, script)
    with receiver() as (url, got):
        (workspace / "chronicle.toml").write_text(
            f'[channels.alerts]\nsession = "{sid[:8]}"\ncoalesce_s = 0.5\nreply_url = "{url}/in?token=s3cret-value"\n')
        with serving(db_url, workspace) as base:
            assert httpx.post(f"{base}/hooks/alerts", json={"text": "disk 91%", "sender": "monitor"}).status_code == 202
            wait_for(lambda: got, timeout=60)
            payload = got[0]["json"]
            turn_id = payload["turn_id"]
            assert payload == {"channel": "alerts", "sender": "monitor", "senders": ["monitor"], "session_id": sid,
                               "turn_id": turn_id, "status": "completed", "text": "disk is fine"}
            assert got[0]["path"] == "/in?token=s3cret-value"
            replies = wait_for(lambda: [a for a in httpx.get(f"{base}/sessions/{sid}/audit").json() if a["kind"] == "reply"], timeout=60)
            assert replies[0]["status"] == "delivered" and replies[0]["turn_id"] == turn_id
            assert replies[0]["detail"]["http_status"] == 200 and replies[0]["detail"]["attempts"] == 1
            assert replies[0]["detail"]["receiver"] == f"{url}/in?token=[REDACTED]"
            log = httpx.get(f"{base}/sessions/{sid}/log").json()
        assert "s3cret-value" not in json.dumps(log) + json.dumps(replies)
        with serving(db_url, workspace) as base:  # a restart sends nothing again: the log says it was delivered
            outbox_looked_again(base)
        assert len(got) == 1
    shown = cli("audit", "--session", sid, db=db_url, env={"COLUMNS": "250"})
    assert "to monitor via alerts: HTTP 200" in shown.stdout, shown.stdout


def test_a_failing_receiver_is_recorded_and_the_turn_is_not_affected(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(text("first"))], [response(text("answer"))], [response(text("two"))]])
    sid = _started(db_url, workspace, script)
    closed = f"http://127.0.0.1:{free_port()}/gone"
    with receiver(status=503) as (url, got):
        (workspace / "chronicle.toml").write_text(
            f'[channels.down]\nsession = "{sid[:8]}"\ncoalesce_s = 0\nreply_url = "{url}/in"\n'
            f'[channels.nobody]\nsession = "{sid[:8]}"\ncoalesce_s = 0\nreply_url = "{closed}"\n')
        with serving(db_url, workspace, env_extra={"CHRONICLE_SERVER_REPLY_BACKOFF_S": "0.3,1"}) as base:
            assert httpx.post(f"{base}/hooks/down", json={"text": "one", "sender": "a"}).status_code == 202
            assert httpx.post(f"{base}/hooks/nobody", json={"text": "two", "sender": "b"}).status_code == 202
            replies = wait_for(lambda: [a for a in httpx.get(f"{base}/sessions/{sid}/audit").json() if a["kind"] == "reply"]
                                if len([a for a in httpx.get(f"{base}/sessions/{sid}/audit").json() if a["kind"] == "reply"]) == 2
                                else None, timeout=90)
            by_channel = {r["name"]: r for r in replies}
            assert by_channel["down"]["status"] == "failed" and by_channel["down"]["is_error"] is True
            assert by_channel["down"]["detail"]["http_status"] == 503 and by_channel["down"]["detail"]["attempts"] == 3
            assert by_channel["nobody"]["detail"]["http_status"] is None and "no answer" in by_channel["nobody"]["detail"]["error"]
            assert len(got) == 3, "bounded: three attempts, then recorded as failed"
            waits = [got[1]["at"] - got[0]["at"], got[2]["at"] - got[1]["at"]]
            # CHRONICLE_SERVER_REPLY_BACKOFF_S's waits, not the defaults' (0.5 s, 2 s): a local 503 takes milliseconds.
            assert waits[0] >= 0.3 and 1.0 <= waits[1] < 2.0, waits
            turns = [a for a in httpx.get(f"{base}/sessions/{sid}/audit").json() if a["kind"] == "turn_end"
                     or (a["kind"] == "turn" and a["status"] in ("completed", "failed"))]
            log = httpx.get(f"{base}/sessions/{sid}/log").json()
            assert [e["status"] for e in log if e["event"] == "Completed"] == ["completed"] * 3, turns
            assert httpx.get(f"{base}/sessions").json()[0]["status"] == "idle"


def test_bad_channel_settings_stop_serve_with_exit_2_naming_the_setting(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("ok"))])
    cases = {
        '[channels.a]\nroute = "per_sender"\nsession = "abc"\n': "drop session",
        '[channels.a]\nroute = "everyone"\nsession = "abc"\n': "route",
        '[channels.a]\nsession = "abc"\nreply_url = "ftp://host/x"\n': "reply_url",
        '[channels.a]\ncoalesce_s = 1\n': "needs session",
        '[channels.a]\nreply_url = "https://x.example/in"\ncoalesce_s = 0\n': "needs session",  # an input setting: a route
        '[channels.a]\nreply_url = "https://x.example/in"\nprovider = "scripted:x"\n': "needs session",
        '[channels.a]\nroute = "per_sender"\nsession = "abc"\nreply_url = "https://x.example/in"\n': "drop session",
        '[channels.a]\nsession = "abc"\nagent = "helper"\n': "per_sender",
        f'[channels.a]\nroute = "per_sender"\nagent = "nobody"\nprovider = "scripted:{script}"\n': "unknown agent 'nobody'",
        '[channels.a]\nroute = "per_sender"\nprovider = "scripted:/no/such/script.json"\n': "cannot start a session",
    }
    for toml, said in cases.items():
        (workspace / "chronicle.toml").write_text(toml)
        refused = cli("serve", "--port", "0", "--workspace", str(workspace), db=sqlite_url)
        assert refused.returncode == 2, (toml, refused.stderr)
        assert "[channels.a]" in refused.stderr and said in refused.stderr, (toml, refused.stderr)


def test_a_sender_whose_session_was_erased_gets_a_fresh_one(sqlite_url, workspace, tmp_path):
    """The derived id of an erased session stays taken: the sender's next message starts the next one."""
    import base64
    import os

    from chronicle.runtime.server.routing import sender_session_id

    env = {"CHRONICLE_CIPHER_KEY": base64.b64encode(os.urandom(32)).decode()}
    script = write_script(tmp_path / "s.json", [[response(text("hi"))], [response(text("again"))]])
    (workspace / "chronicle.toml").write_text(f'[channels.sms]\nroute = "per_sender"\nprovider = "scripted:{script}"\ncoalesce_s = 0\n')
    with serving(sqlite_url, workspace, env_extra=env) as base:
        first = httpx.post(f"{base}/hooks/sms", json={"text": "hello", "sender": "alice"}).json()["session_id"]
        assert first == str(sender_session_id("sms", "alice"))
        wait_for(lambda: httpx.get(f"{base}/sessions").json()[0]["status"] == "idle", timeout=60)
    # Erased while no server runs: a running process keeps the tree's key it read (see the report).
    erased = cli("forget", first, "--yes", db=sqlite_url, env=env)
    assert erased.returncode == 0, erased.stderr
    with serving(sqlite_url, workspace, env_extra=env) as base:
        fresh = httpx.post(f"{base}/hooks/sms", json={"text": "hello again", "sender": "alice"})
        assert fresh.status_code == 202, fresh.text
        assert fresh.json()["session_id"] == str(sender_session_id("sms", "alice", 1))
        log = httpx.get(f"{base}/sessions/{fresh.json()['session_id']}/log").json()
        assert [e["data"]["text"] for e in log if e["event"] == "InputQueued"] == ["hello again"]


def test_a_turn_another_process_finished_while_no_server_ran_is_replied_to_when_one_starts(db_url, workspace, tmp_path):
    """Deliveries are derived from the log: the outbox finds an ended channel turn with no reply event."""
    script = write_script(tmp_path / "s.json", [[response(text("first"))], [response(text("worker answered"))]])
    sid = _started(db_url, workspace, script)
    with receiver() as (url, got):
        (workspace / "chronicle.toml").write_text(f'[channels.ci]\nsession = "{sid[:8]}"\ncoalesce_s = 0\nreply_url = "{url}/in"\n')
        with serving(db_url, workspace, extra=("--no-worker",)) as base:
            assert httpx.post(f"{base}/hooks/ci", json={"text": "deploy done", "sender": "ci-bot"}).status_code == 202
        ran = cli("worker", "--once", "--workspace", str(workspace), db=db_url)
        assert ran.returncode == 0, ran.stderr
        assert got == [], "no server ran: nothing was sent yet"
        with serving(db_url, workspace) as base:
            wait_for(lambda: got, timeout=60)
            assert got[0]["json"]["text"] == "worker answered" and got[0]["json"]["sender"] == "ci-bot"
            wait_for(lambda: [e for e in httpx.get(f"{base}/sessions/{sid}/log").json() if e["event"] == "ReplyDelivered"], timeout=60)
        assert len(got) == 1


def test_a_guardrail_that_takes_origin_is_told_who_sent_the_input_and_whom_the_answer_goes_to(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(text("first"))], [response(text("for alice"))]])
    sid = _started(db_url, workspace, script)
    (workspace / "checks.py").write_text(
        "def tag(text, where, origin):\n"
        "    if origin is None:\n"
        "        return None\n"
        "    return f\"{text} [{where} from {origin['senders'][0]} via {origin['channel']}]\"\n"
        "\n"
        "def plain(text, where):\n"
        "    return None\n"
    )
    (workspace / "chronicle.toml").write_text(
        f'[channels.signal]\nsession = "{sid[:8]}"\ncoalesce_s = 0\n\n'
        '[guardrails.tag]\ncheck = "checks:tag"\non = ["inbound", "final"]\n\n'
        '[guardrails.plain]\ncheck = "checks:plain"\n'
    )
    with serving(db_url, workspace) as base:
        assert httpx.post(f"{base}/hooks/signal", json={"text": "hello", "from": "alice@example.com"}).status_code == 202
        wait_for(lambda: len([e for e in httpx.get(f"{base}/sessions/{sid}/log").json() if e["event"] == "TurnEnded"]) == 2, timeout=60)
    wire = json.dumps(json_lines(cli("history", sid, "--json", db=db_url).stdout))
    assert "hello [inbound from alice@example.com via signal]" in wire, wire
    assert "for alice [final from alice@example.com via signal]" in wire, wire
    assert "start [" not in wire and "first [" not in wire, "an input no channel sent has no origin: the check passes it"
