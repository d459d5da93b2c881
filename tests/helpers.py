"""Builders for scripts and a way to run the real CLI in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(id_: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": name, "input": args}


def response(*blocks: dict[str, Any], stop: str | None = None, usage: tuple[int, int] = (10, 5), **extra: Any) -> dict[str, Any]:
    has_tools = any(b["type"] == "tool_use" for b in blocks)
    return {
        "content": list(blocks),
        "stop_reason": stop or ("tool_use" if has_tools else "end_turn"),
        "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        **extra,
    }


def write_script(path: Path, main: list[Any], **agents: list[Any]) -> Path:
    path.write_text(json.dumps({"agents": {"main": main, **agents}}), encoding="utf-8")
    return path


def cli(*args: str, db: str | None = None, cwd: Path | None = None, env: dict[str, str] | None = None,
        timeout: float = 60, input: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run `chronicle ARGS` as a user would, in a fresh process: forked from a zygote that has
    imported the CLI already (tests/cli_zygote.py), or started from scratch with
    CHRONICLE_TEST_FRESH=1 or when no zygote can run."""
    full_env = _base_env()
    if db:
        full_env["CHRONICLE_DB"] = db
    full_env.update(env or {})
    command = [sys.executable, "-m", "chronicle.runtime.cli", *args]
    forked = _forked(command, list(args), cwd, full_env, timeout, input)
    if forked is not None:
        return forked
    return subprocess.run(command, cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout, input=input)


def _base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "CHRONICLE_DB")}
    env["COLUMNS"] = "200"
    return env


_ZYGOTE: dict[str, Any] = {}

#: Read when modules are imported, not when a command runs: rich's consoles (runtime/cli/common.py)
#: take the terminal's size and colours as they are built, and the interpreter its PYTHON* settings.
#: A command whose environment changes one of these runs in a process of its own.
#: The locale is read at start-up too (the standard streams' encoding).
IMPORT_TIME_ENV = ("COLUMNS", "LINES", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE",
                   "TTY_INTERACTIVE", "JUPYTER_COLUMNS", "JUPYTER_LINES", "LANG", "LC_ALL", "LC_CTYPE")


def _same_at_import(env: dict[str, str], zygote: dict[str, str]) -> bool:
    names = set(IMPORT_TIME_ENV) | {k for k in (*env, *zygote) if k.startswith("PYTHON")}
    return all(env.get(name) == zygote.get(name) for name in names)


def _zygote() -> str | None:
    """The socket of this test process's zygote, started on first use; None if it cannot start."""
    if os.environ.get("CHRONICLE_TEST_FRESH") == "1" or _ZYGOTE.get("broken"):
        return None
    if "path" in _ZYGOTE and _ZYGOTE["process"].poll() is None:
        return str(_ZYGOTE["path"])
    import atexit
    import shutil
    import tempfile

    where = tempfile.mkdtemp(prefix="chronicle-zygote-")
    path = os.path.join(where, "socket")
    env = _base_env()
    process = subprocess.Popen([sys.executable, "-m", "tests.cli_zygote", path], cwd=Path(__file__).parents[1], env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    if process.stdout is None or process.stdout.readline().strip() != "ready":
        process.kill()
        _ZYGOTE["broken"] = True
        return None

    def stop() -> None:
        process.kill()
        process.wait()
        shutil.rmtree(where, ignore_errors=True)

    atexit.register(stop)
    _ZYGOTE.update(path=path, process=process, env=env)
    return path


def _forked(command: list[str], args: list[str], cwd: Path | None, env: dict[str, str], timeout: float,
            input: str | None) -> subprocess.CompletedProcess[str] | None:
    import locale
    import signal
    import socket
    import tempfile

    path = _zygote()
    if path is None or not _same_at_import(env, _ZYGOTE["env"]):
        return None
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err, tempfile.TemporaryFile() as stdin:
        if input is not None:
            stdin.write(input.encode())
            stdin.seek(0)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with sock:
            try:
                sock.connect(path)
            except OSError:
                return None
            request = {"argv": args, "env": env, "cwd": str(cwd or os.getcwd())}
            socket.send_fds(sock, [json.dumps(request).encode()], [stdin.fileno(), out.fileno(), err.fileno()])
            lines = _Lines(sock)
            pid = int(lines.next(timeout=30))
            try:
                code = int(lines.next(timeout=timeout))
            except TimeoutError:
                os.kill(pid, signal.SIGKILL)
                lines.next(timeout=30)
                out.seek(0)
                err.seek(0)
                raise subprocess.TimeoutExpired(command, timeout, output=out.read(), stderr=err.read()) from None
        encoding = locale.getpreferredencoding(False)

        def text(stream: Any) -> str:
            stream.seek(0)
            return str(stream.read().decode(encoding).replace("\r\n", "\n").replace("\r", "\n"))  # universal newlines

        return subprocess.CompletedProcess(command, code, text(out), text(err))


class _Lines:
    """Lines from a socket, each read with its own timeout (a socket file cannot be read after one)."""

    def __init__(self, sock: Any) -> None:
        self.sock, self.buffer = sock, b""

    def next(self, timeout: float) -> str:
        import time

        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(4096)
            except socket_timeout():
                raise TimeoutError from None
            if not chunk:
                raise ConnectionError("the zygote closed the connection without an exit code")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()


def socket_timeout() -> type[BaseException]:
    import socket

    return socket.timeout


def json_lines(stdout: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.strip()]
