"""A real `chronicle serve` process on a loopback port, and an SSE reader for tests."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import httpx

from chronicle.runtime.stack_dumps import DUMP_SIGNAL
from tests import cli_zygote, processes
from tests.helpers import _base_env

#: The waits between a reply's attempts in the servers tests start (CHRONICLE_SERVER_REPLY_BACKOFF_S).
REPLY_BACKOFF_S = "0.05"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def serving(db: str, workspace: Path, token: str | None = None, extra: tuple[str, ...] = (),
            env_extra: dict[str, str] | None = None) -> Iterator[str]:
    with server_process(db, workspace, token, extra, env_extra) as (base, _):
        yield base


@contextmanager
def server_process(db: str, workspace: Path, token: str | None = None, extra: tuple[str, ...] = (),
                   env_extra: dict[str, str] | None = None) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`serving`, with the server's process too: for a test that stops it itself. The process is forked
    from the CLI zygote (tests/cli_zygote.py, `spawn`), which has imported the server already, or
    started from scratch as `helpers.cli` would."""
    base_env = _base_env()
    env = {k: v for k, v in base_env.items() if k != "CHRONICLE_SERVER_TOKEN"}
    env["CHRONICLE_DB"] = db
    if token:
        env["CHRONICLE_SERVER_TOKEN"] = token
    # A failing receiver's retries wait 0.5 s and 2 s by default: a test's wait a moment (test_channels checks the setting).
    env["CHRONICLE_SERVER_REPLY_BACKOFF_S"] = REPLY_BACKOFF_S
    env.update(env_extra or {})
    # Port 0: the server binds a free port itself and says which. A port picked here and bound there could be
    # taken between the two by another test's server, whose /healthz then answered for this one.
    args = ["serve", "--port", "0", "--workspace", str(workspace), *extra]
    command = [sys.executable, "-m", "chronicle.runtime.cli", *args]
    proc: Any = cli_zygote.spawn(command, args, None, env, zygote_env=base_env)
    if proc is None:
        proc = processes.start(command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        base = _served_at(proc, deadline)
        while True:
            try:
                if httpx.get(f"{base}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"server did not start: {proc.stderr.read() if proc.stderr else ''}")
            time.sleep(0.1)
        yield base, proc
    except BaseException:
        # A failing test shows what the server said (a 500's traceback is only in its stderr), and what each of its
        # threads was doing then (runtime/stack_dumps.py): a request that timed out shows where it waits.
        _dump_stacks(proc)
        _stop(proc)
        said = proc.stderr.read() if proc.stderr else ""
        print(f"--- chronicle serve's stderr ---\n{said[-20000:]}", file=sys.stderr)
        raise
    finally:
        _stop(proc)


def _served_at(proc: Any, deadline: float) -> str:
    """The address from the server's "serving on" line; the lines read to find it are put back in front of
    its stderr, so a test reading the server's output whole still reads them."""
    seen: list[str] = []
    found: list[str] = []

    def read() -> None:
        for line in iter(proc.stderr.readline, ""):
            seen.append(line)
            if match := re.search(r"serving on (http://[^/\s]+)/", line):
                found.append(match.group(1))
                return

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(max(0.0, deadline - time.monotonic()))
    if reader.is_alive() or not found:
        raise RuntimeError(f"server did not start: {''.join(seen)}")
    proc.stderr = _Prefixed("".join(seen), proc.stderr)
    return found[0]


class _Prefixed:
    """A text stream that reads `prefix` first, then `rest`."""

    def __init__(self, prefix: str, rest: Any) -> None:
        self.prefix, self.rest = prefix, rest

    def read(self) -> str:
        prefix, self.prefix = self.prefix, ""
        return prefix + self.rest.read()

    def readline(self) -> str:
        if self.prefix:
            line, sep, self.prefix = self.prefix.partition("\n")
            return line + sep
        return str(self.rest.readline())

    def close(self) -> None:
        self.rest.close()


def _dump_stacks(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is not None or DUMP_SIGNAL is None:
        return
    try:
        proc.send_signal(DUMP_SIGNAL)
    except ProcessLookupError:
        return
    time.sleep(0.5)  # the dump is written by the signal handler at once; this is the pipe's time to carry it


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=30)


def sse(base: str, path: str, headers: dict[str, str] | None = None, timeout: float = 60) -> list[tuple[int | None, dict[str, Any]]]:
    """Read a whole SSE response: (the message's own id or None, data) per message, in order."""
    messages: list[tuple[int | None, dict[str, Any]]] = []
    event_id: int | None = None
    with httpx.stream("GET", base + path, headers=headers or {}, timeout=timeout) as response:
        assert response.status_code == 200, response.read()
        for line in response.iter_lines():
            if line.startswith("id:"):
                event_id = int(line[3:].strip())
            elif line.startswith("data:"):
                messages.append((event_id, json.loads(line[5:].strip())))
                event_id = None
    return messages


def after_id(messages: list[tuple[int | None, dict[str, Any]]], last_event_id: int) -> list[tuple[int | None, dict[str, Any]]]:
    """What a client that had received up to the message with this id has not seen yet."""
    index = max(i for i, (event_id, _) in enumerate(messages) if event_id == last_event_id)
    return messages[index + 1:]


def healthz(base: str, token: str | None = None) -> dict[str, Any]:
    """/healthz as a caller with the token sees it (the server's notes, outbox, worker and streams)."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    answer = httpx.get(f"{base}/healthz", headers=headers, timeout=30)
    assert answer.status_code == 200, answer.text
    return dict(answer.json())


def outbox_status(base: str, token: str | None = None) -> dict[str, Any]:
    """/healthz's `outbox`: how far the server's outbox has looked (runtime/server/outbox_progress.py)."""
    return dict(healthz(base, token)["outbox"])


def worker_status(base: str, token: str | None = None) -> dict[str, Any]:
    """/healthz's `worker`: how far the server's worker has looked for work (runtime/app/worker_progress.py)."""
    return dict(healthz(base, token)["worker"])


def outbox_looked_again(*bases: str, timeout: float = 120) -> None:
    """Wait until each server's outbox has made a whole pass that began after this call: a pass POSTs what it
    finds due before it ends, so what was not sent by then was not due (rather than sleeping "long enough")."""
    _passed_twice("outbox", outbox_status, bases, timeout)


def worker_looked_again(*bases: str, timeout: float = 120) -> None:
    """Wait until each server's worker has made a whole look for work that began after this call: a look starts
    every session it has a free slot for before it ends, so one not started by then was not taken."""
    _passed_twice("worker", worker_status, bases, timeout)


def _passed_twice(what: str, status_of: Any, bases: tuple[str, ...], timeout: float) -> None:
    start = {base: status_of(base)["passes"] for base in bases}
    deadline = time.monotonic() + timeout
    for base in bases:
        while (status := status_of(base))["passes"] < start[base] + 2:
            assert status["running"], status
            if time.monotonic() > deadline:
                raise AssertionError(f"the {what} of {base} made no whole pass in {timeout:.0f} s: {status}")
            time.sleep(0.05)


def streams_ended(base: str, timeout: float = 60) -> None:
    """Wait until the server holds no live event stream open (runtime/server/event_stream.py's OpenStreams): none is
    writing to a client any more."""
    deadline = time.monotonic() + timeout
    while (open_now := healthz(base)["streams"]["open"]) > 0:
        if time.monotonic() > deadline:
            raise AssertionError(f"{open_now} event stream(s) of {base} still open after {timeout:.0f} s")
        time.sleep(0.05)
