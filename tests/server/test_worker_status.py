"""`GET /healthz` says how far the server's worker has looked for work (runtime/app/worker_progress.py) and how many
live event streams are open (runtime/server/event_stream.py's OpenStreams): an operator's view of whether queued
sessions are picked up and how many clients follow sessions, and a test's signal instead of a sleep. Only to a
caller with the token, as the outbox's."""

from __future__ import annotations

import asyncio
import threading
from datetime import datetime

import httpx

from chronicle.runtime.app.worker import Overrides, Worker, WorkerOptions
from chronicle.runtime.store import ChronicleStore
from tests.helpers import response, text, write_script
from tests.recovery import wait_for
from tests.server.serving import healthz, serving, streams_ended, worker_status


def test_healthz_says_the_worker_looks_for_work_and_how_many_sessions_it_has_in_hand(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("done"), until_file="open")])
    with serving(db_url, workspace, token="t0ken", extra=("--concurrency", "3")) as base:
        assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}, "nothing of the worker without the token"
        idle = wait_for(lambda: (s := worker_status(base, "t0ken"))["passes"] >= 1 and s, timeout=60)
        assert idle["running"] is True and idle["concurrency"] == 3 and idle["in_hand"] == 0 and idle["error"] is None
        assert datetime.fromisoformat(idle["last_pass_at"])
        headers = {"Authorization": "Bearer t0ken"}
        created = httpx.post(f"{base}/sessions", json={"prompt": "go", "provider": f"scripted:{script}"}, headers=headers)
        assert created.status_code == 201, created.text
        busy = wait_for(lambda: (s := worker_status(base, "t0ken"))["in_hand"] == 1 and s, timeout=60)
        assert busy["passes"] > idle["passes"]
        (tmp_path / "open").write_text("", encoding="utf-8")
        wait_for(lambda: worker_status(base, "t0ken")["in_hand"] == 0, timeout=60)
    with serving(db_url, workspace, extra=("--no-worker",)) as base:
        assert worker_status(base) == {"running": False, "concurrency": None, "in_hand": 0, "passes": 0,
                                       "last_pass_at": None, "error": None}


def test_a_look_for_work_that_fails_is_said_and_the_passes_stand_still(proxied, monkeypatch):
    """A lost database (a proxy in between is cut): the failed look says why, one line, and `passes` counts only
    completed looks; they go on once the database is back."""
    _, via_proxy, proxy = proxied
    monkeypatch.setenv("CHRONICLE_PG_CONNECT_TIMEOUT", "1")  # each look gives up after ten one-second retries
    store = ChronicleStore(via_proxy)
    worker = Worker(store, Overrides(), WorkerOptions(poll_s=0.02), log=lambda _: None)
    stop = threading.Event()
    worker.stop_when = stop.is_set
    thread = threading.Thread(target=asyncio.run, args=(worker.run(),))
    thread.start()
    try:
        done = wait_for(lambda: worker.progress.passes.passes >= 1 and worker.progress.passes)
        proxy.cut()
        failed = wait_for(lambda: worker.progress.passes.error and worker.progress.passes, timeout=90)
        assert "\n" not in failed.error and failed.passes >= done.passes and failed.at == worker.progress.passes.at, failed
        proxy.restore()
        wait_for(lambda: worker.progress.passes.passes > failed.passes and worker.progress.passes.error is None, timeout=90)
    finally:
        stop.set()
        proxy.restore()
        thread.join(60)
        store.close()
    assert not thread.is_alive()


def test_healthz_counts_the_live_event_streams_open_until_their_clients_leave(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("Hello."))])
    with serving(sqlite_url, workspace, extra=("--no-worker",)) as base:
        streams = healthz(base)["streams"]
        assert streams["open"] == 0 and streams["limit"] >= 8, streams  # the limit: event_stream.stream_limit
        sid = httpx.post(f"{base}/sessions", json={"prompt": "hi", "provider": f"scripted:{script}"}).json()["session_id"]
        # The queued input keeps the stream following: it stays open until its client leaves.
        with httpx.stream("GET", f"{base}/sessions/{sid}/events", timeout=30) as followed:
            assert followed.status_code == 200
            wait_for(lambda: healthz(base)["streams"]["open"] == 1, timeout=30)
            with httpx.stream("GET", f"{base}/sessions/{sid}/events", timeout=30):
                wait_for(lambda: healthz(base)["streams"]["open"] == 2, timeout=30)
            wait_for(lambda: healthz(base)["streams"]["open"] == 1, timeout=30)
        streams_ended(base)
        assert httpx.get(f"{base}/sessions/{sid}/events?follow=false", timeout=30).status_code == 200  # ends by itself
        assert healthz(base)["streams"]["open"] == 0
