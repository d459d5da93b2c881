"""`chronicle serve` runs a worker of its own, and its log says what that worker does in the lines `chronicle worker`
prints (started, each turn's outcome, draining, stopped), with the secrets of this process masked in both: the
server's worker logged to a logger nobody had set up, so nothing of its turns reached the operator, and a turn's
reason (a provider's error repeating a key) went into the worker's log as it came."""

from __future__ import annotations

import re
import signal

import httpx

from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.recovery import wait_for
from tests.server.serving import server_process

SECRET = "sk-proj-Zq8xS3cr3tV4lu3Xy"
FAILING = {"stop_reason": "error", "error": {"kind": "authentication_error", "retryable": False,
                                               "message": f"Incorrect API key provided: {SECRET}"}}


def turn_line(said: str, sid: str) -> str:
    """The worker's line for the session's turn, its name left out (each process has its own)."""
    found = re.findall(rf"^worker \S+: session {sid} turn \S+ (.*)$", said, re.MULTILINE)
    assert len(found) == 1, said
    return str(found[0])


def test_serves_worker_logs_each_turn_as_chronicle_worker_does_and_masks_secrets(sqlite_url, workspace, tmp_path):
    fails = write_script(tmp_path / "fails.json", [FAILING])
    works = write_script(tmp_path / "works.json", [response(text("fine"))])
    env = {"ACME_API_KEY": SECRET}
    with server_process(sqlite_url, workspace, env_extra=env) as (base, server):
        failed = httpx.post(f"{base}/sessions", json={"prompt": "a", "provider": f"scripted:{fails}"}, timeout=30).json()["session_id"]
        completed = httpx.post(f"{base}/sessions", json={"prompt": "b", "provider": f"scripted:{works}"}, timeout=30).json()["session_id"]
        wait_for(lambda: {(s["status"], s["turns"], s["queued"]) for s in httpx.get(f"{base}/sessions", timeout=30).json()}
                 == {("idle", 1, 0)}, timeout=60)  # both turns ended
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        served = server.stderr.read() if server.stderr else ""
    assert re.search(r"^worker \S+: started \(concurrency 4, lease 30 s\)$", served, re.MULTILINE), served
    assert turn_line(served, completed) == "completed"
    # Cut from the reason before it was recorded (the key is this process's), and masked in the line as well.
    assert turn_line(served, failed) == "failed: model call failed: Incorrect API key provided: [REDACTED:environment]"
    assert re.search(r"^worker \S+: stopped after 2 turn\(s\)$", served, re.MULTILINE), served
    assert SECRET not in served

    # `chronicle worker` says the same of the same turn, through the same code.
    again = cli("submit", "c", "--provider", f"scripted:{fails}", "--workspace", str(workspace), db=sqlite_url)
    worked = cli("worker", "--once", "--poll", "0.1", db=sqlite_url, env=env, timeout=90)
    assert worked.returncode == 0, worked.stderr
    assert turn_line(worked.stderr, again.stdout.strip()) == turn_line(served, failed)
    assert SECRET not in worked.stderr


def test_serves_worker_repairs_as_every_worker_does_a_broken_tool_is_reported(sqlite_url, workspace, tmp_path):
    """docs/deployment.md: self-repair runs inside every worker. serve's ran none, so a tool failing run after run
    on a server alone was never reported."""
    missing = [tool_use(f"m{i}", "read_file", path=f"missing-{i}.txt") for i in range(5)]
    script = write_script(tmp_path / "s.json", [response(*missing), response(text("gave up"))])
    with server_process(sqlite_url, workspace) as (base, server):
        httpx.post(f"{base}/sessions", json={"prompt": "read", "provider": f"scripted:{script}"}, timeout=30).raise_for_status()
        found = wait_for(lambda: [r for r in json_lines(cli("repairs", "--json", db=sqlite_url).stdout)
                                  if r["kind"] == "broken_tool"], timeout=60)  # the worker's next pass, within 10 s
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
        served = server.stderr.read() if server.stderr else ""
    assert [(r["target"], r["status"]) for r in found] == [("read_file", "manual_required")], found
    assert re.search(r"^worker \S+: self-repair broken_tool read_file: manual_required: ", served, re.MULTILINE), served
