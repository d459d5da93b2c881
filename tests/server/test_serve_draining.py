"""`chronicle serve` told to stop by its supervisor (SIGTERM) drains with its port open: new work is refused with 503
and Retry-After, /healthz answers 503 draining (a load balancer takes it out of rotation) while reads go on, and once
the turn in hand is recorded it exits 0. It closed its port at the first signal, so the supervisor saw it down while
it still finished the turn, and it ended by re-raising the signal (exit 143). A second signal, or a drain past its
limit, stops at once as `chronicle worker` does: the running commands killed, the turn left in flight to its lease."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import httpx

from tests.e2e.test_cli_mcp import alive
from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.recovery import wait_for
from tests.server.serving import server_process


def draining(base: str) -> httpx.Response | None:
    """/healthz once it says draining; None before. A closed port raises (httpx.ConnectError): the port stays open."""
    answer = httpx.get(f"{base}/healthz", timeout=10)
    return answer if answer.status_code == 503 else None


def session_rows(db: str) -> list[dict[str, Any]]:
    return json_lines(cli("sessions", "--json", db=db).stdout)


def held_turn(base: str, tmp_path: Path, headers: dict[str, str] | None = None) -> str:
    """A session whose model call is held until tmp_path/go exists; returned once the call has begun."""
    script = write_script(tmp_path / "s.json", [response(text("finished while draining"), until_file="go", started_file="started")])
    created = httpx.post(f"{base}/sessions", json={"prompt": "take your time", "provider": f"scripted:{script}"},
                         headers=headers, timeout=30)
    assert created.status_code == 201, created.text
    wait_for(lambda: (tmp_path / "started").exists(), timeout=60)
    return str(created.json()["session_id"])


def test_a_sigterm_drains_with_the_port_open_and_exits_0_once_the_running_turn_is_recorded(db_url, workspace, tmp_path):
    token = {"Authorization": "Bearer t0ken"}
    with server_process(db_url, workspace, token="t0ken") as (base, server):
        sid = held_turn(base, tmp_path, token)
        server.send_signal(signal.SIGTERM)

        health = wait_for(lambda: draining(base), timeout=30, interval=0.05)
        assert health.json() == {"status": "draining"}, "without the token: the status alone"
        told = httpx.get(f"{base}/healthz", headers=token, timeout=10)
        assert told.status_code == 503 and told.json()["draining"]["in_hand"] == 1, told.json()
        assert told.json()["worker"]["running"] is False
        assert httpx.head(f"{base}/healthz").status_code == 503
        listed = httpx.get(f"{base}/sessions", headers=token, timeout=30)  # reads go on while it drains
        assert listed.status_code == 200 and [(s["session_id"], s["status"]) for s in listed.json()] == [(sid, "running")]
        assert httpx.get(f"{base}/sessions/{sid}/log", headers=token, timeout=30).status_code == 200
        for path, body in (("/sessions", {"prompt": "another"}), (f"/sessions/{sid}/inputs", {"prompt": "and then?"}),
                           ("/hooks/ops", {"text": "hello"})):
            refused = httpx.post(f"{base}{path}", json=body, headers=token, timeout=30)
            assert refused.status_code == 503, (path, refused.status_code, refused.text)
            assert refused.json()["code"] == 1 and "draining" in refused.json()["error"], refused.json()
            assert 1 <= int(refused.headers["retry-after"]) <= 30, refused.headers
        assert server.poll() is None, "the server stopped before its turn ended"

        (tmp_path / "go").write_text("", encoding="utf-8")
        assert server.wait(timeout=60) == 0
        said = server.stderr.read() if server.stderr else ""
    assert "chronicle: draining:" in said and "chronicle: drained" in said, said
    assert f"session {sid} turn " in said and " completed" in said, said  # the worker's own line, as `chronicle worker` logs it
    rows = session_rows(db_url)
    assert [(r["session_id"], r["status"], r["turns"], r["queued"]) for r in rows] == [(sid, "idle", 1, 0)], \
        "the turn ended recorded, and nothing refused was recorded"
    history = json_lines(cli("history", sid, "--json", db=db_url).stdout)
    assert any("finished while draining" in str(entry) for entry in history), history


def test_a_drain_past_its_limit_kills_the_running_command_leaves_the_turn_to_its_lease_and_exits_0(sqlite_url, workspace, tmp_path):
    pidfile = tmp_path / "sleeper.pid"
    script = write_script(tmp_path / "s.json", [
        response(tool_use("b1", "bash", command=f"sleep 60 & echo $! > {pidfile}; wait")), response(text("done")),
    ])
    with server_process(sqlite_url, workspace, extra=("--drain-s", "0.5")) as (base, server):
        sid = httpx.post(f"{base}/sessions", json={"prompt": "sleep", "provider": f"scripted:{script}"}, timeout=30).json()["session_id"]
        wait_for(lambda: httpx.post(f"{base}/sessions/{sid}/approve", json={}, timeout=30).status_code == 200, timeout=60)
        wait_for(lambda: pidfile.exists() and pidfile.read_text().strip() != "", timeout=60)
        sleeper = int(pidfile.read_text())
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=30) == 0
        said = server.stderr.read() if server.stderr else ""
    assert "the drain limit (0.5 s) passed; 1 running command(s) killed; the 1 session(s) in hand are left to their leases" in said, said
    wait_for(lambda: not alive(sleeper), timeout=10)  # the command's group went with it, not left to run on
    # Left in flight for its lease, not made up: with serve gone nobody runs it, so it lists interrupted (resume goes on).
    assert [(r["status"], r["last_turn_status"]) for r in session_rows(sqlite_url)] == [("interrupted", "interrupted")]


def test_a_second_sigterm_while_draining_stops_at_once_and_says_what_it_leaves(sqlite_url, workspace, tmp_path):
    with server_process(sqlite_url, workspace) as (base, server):
        sid = held_turn(base, tmp_path)
        server.send_signal(signal.SIGTERM)
        wait_for(lambda: draining(base), timeout=30, interval=0.05)
        server.send_signal(signal.SIGTERM)
        assert server.wait(timeout=10) == 143
        said = server.stderr.read() if server.stderr else ""
    assert "stopped at once by a second signal; 0 running command(s) killed; the 1 session(s) in hand are left to " \
           "their leases" in said, said
    assert [(r["session_id"], r["status"]) for r in session_rows(sqlite_url)] == [(sid, "interrupted")]
