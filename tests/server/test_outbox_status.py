"""`GET /healthz` says how far the server's outbox has looked (runtime/server/outbox_progress.py): whether it
runs, its passes, the log position its last pass read through, and why the last attempt failed; only to a
caller with the token. And CHRONICLE_SERVER_REPLY_BACKOFF_S, the waits between a reply's attempts, is refused
on one line when it cannot work."""

from __future__ import annotations

import threading
from uuid import UUID

import httpx

from chronicle.runtime.environment import environment
from chronicle.runtime.server.channels import load_channels
from chronicle.runtime.server.outbox import Outbox
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, response, text, write_script
from tests.recovery import wait_for
from tests.server.serving import outbox_status, serving
from tests.server.test_channels import _started, receiver


def test_healthz_says_how_far_the_outbox_has_looked_and_only_to_a_caller_with_the_token(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(text("first"))], [response(text("done"))]])
    sid = _started(db_url, workspace, script)
    with receiver() as (url, got):
        (workspace / "chronicle.toml").write_text(f'[channels.ci]\nsession = "{sid[:8]}"\ncoalesce_s = 0\nreply_url = "{url}/in"\n')
        with serving(db_url, workspace, token="t0ken") as base:
            assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}, "nothing of the outbox without the token"
            first = wait_for(lambda: (s := outbox_status(base, "t0ken"))["passes"] >= 1 and s, timeout=60)
            assert first["running"] is True and first["error"] is None and first["last_pass_at"]
            assert isinstance(first["position"], int)
            posted = httpx.post(f"{base}/hooks/ci", json={"text": "go", "sender": "bot"}, headers={"Authorization": "Bearer t0ken"})
            assert posted.status_code == 202
            wait_for(lambda: got, timeout=60)
            store = ChronicleStore(db_url)
            try:
                head = wait_for(lambda: [e for e in store.events.get(UUID(sid)) if type(e).__name__ == "ReplyDelivered"]
                                 and store.max_position(), timeout=60)
            finally:
                store.close()
            later = wait_for(lambda: (s := outbox_status(base, "t0ken"))["position"] >= head and s, timeout=60)
            assert later["passes"] > first["passes"] and later["position"] > first["position"]
    (workspace / "chronicle.toml").write_text("")
    with serving(db_url, workspace) as base:
        assert outbox_status(base)["running"] is False, "no channel with a reply_url: no outbox runs"


def test_an_outbox_pass_that_fails_is_said_and_the_passes_stand_still(sqlite_url, workspace, tmp_path):
    """A lost store: the failed attempt says why, one line, and `passes` counts only completed passes."""
    script = write_script(tmp_path / "s.json", [[response(text("first"))]])
    sid = _started(sqlite_url, workspace, script)
    (workspace / "chronicle.toml").write_text(f'[channels.ci]\nsession = "{sid[:8]}"\nreply_url = "http://127.0.0.1:9/in"\n')
    store = ChronicleStore(sqlite_url)
    outbox = Outbox(store, load_channels(workspace / "chronicle.toml"), set(), workspace=workspace)
    outbox.start()
    try:
        done = wait_for(lambda: (s := outbox.status())["passes"] >= 1 and s, timeout=60)
        store.close()  # every look after this fails
        failed = wait_for(lambda: (s := outbox.status())["error"] and s, timeout=60)
        assert failed["running"] is True and "\n" not in failed["error"], failed
        assert failed["position"] == done["position"], "the position of the last pass that completed"
    finally:
        outbox.stop(30)
    assert outbox.status()["running"] is False and not any(t.name == "chronicle-outbox" for t in threading.enumerate())


def test_the_reply_backoff_setting_defaults_to_half_a_second_then_two_and_one_that_cannot_work_stops_serve(sqlite_url):
    assert environment().server_reply_backoff_s == (0.5, 2.0)
    for bad in ("soon", "1,,2", "-1", "nan", "0.5,9999"):
        refused = cli("serve", "--port", "0", env={"CHRONICLE_SERVER_REPLY_BACKOFF_S": bad}, db=sqlite_url)
        assert refused.returncode == 2 and "CHRONICLE_SERVER_REPLY_BACKOFF_S" in refused.stderr, (bad, refused.stderr)
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr

