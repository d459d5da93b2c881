"""A server at its file descriptor limit: asyncio's `socket.accept() out of system resource` is logged once in a while
with a count, not a thousand times a second (10 GB of log a day), and live event streams past a limit are refused
with 503 and Retry-After, so that descriptors are left for /healthz and the API."""

from __future__ import annotations

import asyncio
import errno
import logging
import socket

import httpx

from chronicle.runtime.server.accept_flood import ACCEPT_FAILED, AcceptFailures, quiet_accept_failures
from chronicle.runtime.server.event_stream import FEWEST_STREAMS, stream_limit
from tests.helpers import cli, json_lines, response, text, write_script
from tests.recovery import wait_for
from tests.server.serving import server_process


class Lines(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


def test_asyncios_accept_failure_is_logged_once_per_interval_with_a_count():
    now = {"t": 100.0}
    quiet = AcceptFailures(every_s=30, clock=lambda: now["t"])
    logger = logging.getLogger("asyncio")
    seen = Lines()
    logger.addHandler(seen)
    logger.addFilter(quiet)
    loop = asyncio.new_event_loop()
    listening = socket.socket()
    try:
        def fail_to_accept() -> None:  # as selector_events._accept_connection tells it, through the loop's handler
            loop.call_exception_handler({"message": ACCEPT_FAILED, "exception": OSError(errno.EMFILE, "Too many open files"),
                                         "socket": listening})

        for _ in range(1000):
            fail_to_accept()
            now["t"] += 0.01  # ten seconds of a flood
        loop.call_exception_handler({"message": "Task exception was never retrieved"})  # any other line passes
        now["t"] += 25
        fail_to_accept()
    finally:
        loop.close()
        listening.close()
        logger.removeFilter(quiet)
        logger.removeHandler(seen)
    accept = [line for line in seen.lines if line.startswith(ACCEPT_FAILED)]
    assert len(accept) == 2, accept
    assert "Too many open files" in accept[0] and "ulimit -n" in accept[0] and "Traceback" not in accept[0]
    assert "999 more in the last 35 s not logged" in accept[1], accept[1]
    assert any(line.startswith("Task exception was never retrieved") for line in seen.lines)
    assert quiet_accept_failures() is quiet_accept_failures()  # one filter per process, however many servers start


def test_the_default_stream_limit_leaves_half_the_descriptors():
    import resource

    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert stream_limit(None) == max(FEWEST_STREAMS, soft // 2)
    assert stream_limit(3) == 3


def test_a_stream_past_the_limit_is_503_with_retry_after_and_healthz_answers(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("done"))])
    ran = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert ran.returncode == 0, ran.stderr
    sid = json_lines(cli("sessions", "--json", db=sqlite_url).stdout)[0]["session_id"]
    head = json_lines(cli("log", sid, "--json", db=sqlite_url).stdout)[-1]["position"]
    with server_process(sqlite_url, workspace, env_extra={"CHRONICLE_SERVER_MAX_STREAMS": "1"}) as (base, _server):
        with httpx.Client(timeout=30) as client, client.stream("GET", f"{base}/sessions/{sid}/events?after={head}") as first:
            assert first.status_code == 200
            wait_for(lambda: httpx.get(f"{base}/healthz", timeout=10).json()["streams"]["open"] == 1, timeout=30)
            second = httpx.get(f"{base}/sessions/{sid}/events", timeout=10)
            assert second.status_code == 503 and second.json()["code"] == 1, second.text
            assert "CHRONICLE_SERVER_MAX_STREAMS" in second.json()["error"] and second.headers["retry-after"] == "5"
            health = httpx.get(f"{base}/healthz", timeout=10).json()
            assert health["streams"] == {"open": 1, "limit": 1}, health
