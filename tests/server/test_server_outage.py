"""The server while its PostgreSQL is lost: a live stream waiting on the database holds nobody else.

One event loop serves every request and, with the worker on, runs turns. A live event stream
reads the store every 0.2 s; during an outage each read waits while eventsourcing retries the
connection (ten attempts at CHRONICLE_PG_CONNECT_TIMEOUT, 1 s here). Made on the loop's thread,
that wait stalled every other request, health checks included, for as long as it lasted.
"""

from __future__ import annotations

import signal
import threading
import time
from uuid import UUID

import httpx

from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, response, text, tool_use, write_script
from tests.pgproxy import CuttableProxy
from tests.recovery import wait_for
from tests.server.serving import server_process, serving


def test_a_stream_waiting_on_a_lost_database_does_not_hold_other_requests(proxied, workspace, tmp_path):
    direct, via_proxy, proxy = proxied
    script = write_script(tmp_path / "s.json", [response(text("Hello."))])
    # A queued input that no worker runs keeps the stream following (and polling the store).
    submitted = cli("submit", "hello", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=direct)
    assert submitted.returncode == 0, submitted.stderr
    with serving(via_proxy, workspace, extra=("--no-worker",), env_extra={"CHRONICLE_PG_CONNECT_TIMEOUT": "1"}) as base:
        sid = httpx.get(f"{base}/sessions", timeout=10).json()[0]["session_id"]
        opened = threading.Event()
        ended: list[str] = []

        def follow() -> None:
            try:
                with httpx.stream("GET", f"{base}/sessions/{sid}/events", timeout=60) as stream:
                    opened.set()
                    for _ in stream.iter_lines():
                        pass
            except httpx.HTTPError as exc:
                ended.append(type(exc).__name__)
            opened.set()

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        assert opened.wait(30), "the stream did not open"
        time.sleep(0.5)  # it is polling
        assert_healthz_answers_at_once_during_an_outage(base, proxy, "the stream's store reads")


def test_a_server_followed_by_a_client_stops_at_once(sqlite_url, workspace, tmp_path):
    """uvicorn waits for open requests before it stops, and a live stream lasts as long as its
    session runs: a server with a viewer open did not stop on SIGTERM or Ctrl-C at all."""
    script = write_script(tmp_path / "s.json", [response(text("Hello."))])
    submitted = cli("submit", "hello", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert submitted.returncode == 0, submitted.stderr
    with server_process(sqlite_url, workspace, extra=("--no-worker",)) as (base, server):
        sid = httpx.get(f"{base}/sessions", timeout=10).json()[0]["session_id"]
        with httpx.stream("GET", f"{base}/sessions/{sid}/events", timeout=30) as stream:
            lines = stream.iter_lines()
            started = time.monotonic()
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=20)
            stopped = time.monotonic() - started
            list(lines)  # the stream has ended (a cut one raises here)
        assert stopped < 2, f"the server took {stopped:.1f} s to stop"
        assert "Cancel" not in (server.stderr.read() if server.stderr else ""), "no request had to be cut"


def test_a_turn_waiting_on_a_lost_database_does_not_hold_the_server(proxied, workspace, tmp_path):
    """With the worker on (the default), turns run in the server process: their store writes
    wait out an outage in the worker's own thread, not on the loop that answers requests."""
    direct, via_proxy, proxy = proxied
    script = write_script(tmp_path / "s.json", [
        response(tool_use("r1", "list_dir", path="."), delay_s=0.4),
        response(tool_use("r2", "list_dir", path="."), delay_s=0.4),
        response(text("done"), delay_s=0.1),
    ])
    store = ChronicleStore(direct)
    with serving(via_proxy, workspace, env_extra={"CHRONICLE_PG_CONNECT_TIMEOUT": "1"}) as base:
        created = httpx.post(f"{base}/sessions", json={"prompt": "go", "provider": f"scripted:{script}"}, timeout=10)
        assert created.status_code == 201, created.text
        wait_for(lambda: store.max_position() >= 6, timeout=30)  # the turn is under way
        assert_healthz_answers_at_once_during_an_outage(base, proxy, "the worker's store writes")
        sid = created.json()["session_id"]
        wait_for(lambda: store.session(UUID(sid)).active_turn_id is None and not store.session(UUID(sid)).queue, timeout=90)
    turn = store.turn(store.session(UUID(sid)).turns[-1])
    assert turn.status == "completed", turn.status
    store.close()


def assert_healthz_answers_at_once_during_an_outage(base: str, proxy: CuttableProxy, behind: str) -> None:
    """Cut the database, let what is under way start retrying it, ask /healthz, restore."""
    proxy.cut()
    time.sleep(1.0)  # the next store call is now retrying the lost connection
    started = time.monotonic()
    health = httpx.get(f"{base}/healthz", timeout=30)
    waited = time.monotonic() - started
    proxy.restore()
    assert health.status_code == 200
    assert waited < 3, f"/healthz waited {waited:.1f} s behind {behind}"


def test_a_lost_database_is_a_json_503_naming_it_and_soon_not_after_a_minute_of_retries(pg_database, workspace, tmp_path):
    """After `DROP DATABASE … WITH (FORCE)`, `GET /sessions` answered a plain-text "Internal Server
    Error" after 52 s (the pool retried a database that no longer exists, ten times). Now a JSON 503
    with one line naming the problem, at once, and the traceback stays in the server's log.

    The database goes as a forced drop takes it (`take_database_away`), without the drop's wait for a
    checkpoint of the whole server (up to 40 s in a busy run); it is dropped after the test."""
    from tests.conftest import own_database, take_database_away

    script = write_script(tmp_path / "s.json", [response(text("Hello."))])
    with own_database(pg_database, "chronicle_gone") as (name, url), server_process(url, workspace) as (base, proc):
        created = httpx.post(f"{base}/sessions", json={"prompt": "hi", "provider": f"scripted:{script}"}, timeout=30)
        assert created.status_code == 201, created.text
        wait_for(lambda: httpx.get(f"{base}/sessions", timeout=30).json()[0]["status"] == "idle", timeout=30)
        take_database_away(name)
        for path in ("/sessions", f"/sessions/{created.json()['session_id']}/log", "/"):
            started = time.monotonic()
            lost = httpx.get(f"{base}{path}", timeout=60)
            waited = time.monotonic() - started
            assert lost.status_code == 503, (path, lost.status_code, lost.text[:300])
            said = lost.json()["error"]
            assert f'database "{name}" does not exist' in said and "\n" not in said and "Traceback" not in lost.text
            assert waited < 3, f"{path} waited {waited:.1f} s for a database that is gone"
        assert httpx.get(f"{base}/healthz", timeout=10).status_code == 200
        proc.terminate()
        proc.wait(timeout=30)
        assert "does not exist" in (proc.stderr.read() if proc.stderr else ""), "the server's log keeps it"


def test_a_database_dropped_and_created_again_under_the_server_is_503_and_healthz_asks_for_a_restart(
        pg_database, workspace, tmp_path):
    """A restore by drop and create under a running server: its sessions are of the old database, so it answers
    503 naming that (reads too), and /healthz says `store_gone` so that a supervisor restarts it."""
    import psycopg

    from tests.conftest import ADMIN_DSN, own_database, take_database_away

    script = write_script(tmp_path / "s.json", [response(text("Hello."))])
    with own_database(pg_database, "chronicle_restored") as (name, url), server_process(url, workspace) as (base, _):
        created = httpx.post(f"{base}/sessions", json={"prompt": "hi", "provider": f"scripted:{script}"}, timeout=30)
        assert created.status_code == 201, created.text
        take_database_away(name)
        with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        ChronicleStore(url).close()  # the restore's tables
        # Until its verdict on the vanished database expires (a second), the server may still say that one.
        refused = wait_for(lambda: (r := httpx.get(f"{base}/sessions", timeout=60)).status_code == 503
                           and "was dropped and created again" in r.json()["error"] and r, timeout=30)
        assert refused.json()["code"] == 1
        health = httpx.get(f"{base}/healthz", timeout=30)
        assert health.status_code == 503 and health.json()["status"] == "store_gone", health.text
