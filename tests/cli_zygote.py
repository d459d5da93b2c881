"""Run `chronicle ARGS` in a fresh process without paying for interpreter start-up and imports.

The suite runs the real CLI some 800 times, and each run spent most of its second starting
Python and importing the commands before doing anything. A zygote process imports the CLI and
its commands once; each command then runs in a child forked from it, with its own standard
streams, working directory, environment and `sys.argv`, and exits as `python -m
chronicle.runtime.cli` would (atexit handlers, thread shutdown, the exit status). What the child
inherits is only what importing the code left behind, which a fresh process would build the
same way: Chronicle reads neither the environment nor the working directory at import, except
for the consoles rich builds then (terminal size, colours), so a command whose environment
changes those starts from scratch (`IMPORT_TIME_ENV`). The start-up tests (tests/unit) time and
list imports in real fresh processes of their own.

Each child leads a session and process group of its own, and the test ends the group with everything in it
(tests/processes.py), passed or failed.

Protocol, one Unix-socket connection per command: the client sends stdin/stdout/stderr as file
descriptors (SCM_RIGHTS) with one JSON message {argv, env, cwd}; the zygote answers the child's
pid as one line, then its exit code as another when the child ends (SIGKILL shows as -9). The
zygote is single-threaded: it forks only from its main loop, never with another thread alive.
"""

from __future__ import annotations

import importlib
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tests import processes

#: What every child needs imported; each command module is imported as well (runtime/cli/app.py's
#: table), so a command finds its own code loaded. The commands import their use cases only when
#: they run (runtime/cli/lazy.py, imports in a command's body), so those are named here too.
PRELOAD = ("chronicle.runtime.cli.entry", "chronicle.runtime.cli.app", "chronicle.runtime.app.running",
           "chronicle.runtime.agents.registry", "chronicle.runtime.tools.mcp_tools", "chronicle.runtime.skills")

#: What a command on PostgreSQL imports when it opens its store (eventsourcing's recorders, psycopg and its pool,
#: and the adapters psycopg registers at import): a third of the CPU of each such child when it was left to the
#: child (py-spy over the bundle and time-travel tests); a command on SQLite never touches it.
PRELOAD_POSTGRES = ("psycopg", "psycopg_pool", "eventsourcing.postgres")

#: A command whose environment names one of these may call a provider's SDK: it runs in the "models" zygote, which
#: holds the SDKs (`_warm_providers`).
MODEL_ENV = ("ANTHROPIC_BASE_URL", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY")

#: What `chronicle serve` imports once it runs (runtime/cli/serve_cmd.py, uvicorn's protocol choices made
#: when it starts): a second of each server's start-up, paid once by a zygote of its own (`spawn`), so the
#: zygote of every other command holds what it held before. Skipped without the extra.
PRELOAD_SERVE = ("uvicorn", "uvicorn.config", "uvicorn.server", "uvicorn.protocols.http.auto",
                 "uvicorn.protocols.websockets.auto", "uvicorn.lifespan.on", "uvicorn.loops.auto",
                 "chronicle.runtime.server.api", "chronicle.runtime.server.channels", "chronicle.runtime.routines",
                 "chronicle.runtime.collector")


def preload(kind: str = "") -> None:
    """What a zygote of `kind` holds: every command's code; "models" adds the providers' SDKs, "server" what
    `chronicle serve` imports."""
    import importlib.util

    for name in PRELOAD:
        importlib.import_module(name)
    from chronicle.runtime.cli.app import COMMANDS

    for command in COMMANDS:
        importlib.import_module("chronicle.runtime.cli." + command.target.split(":")[0])
    for name in PRELOAD_POSTGRES:
        importlib.import_module(name)
    if kind == "models":
        _warm_providers()
    from chronicle.runtime.pricing import _warm_table

    _warm_table()  # the bundled price table, built here once: a run warms it in a thread of its own otherwise (pricing.py)
    _build_deferred()
    for name in PRELOAD_SERVE if kind == "server" else ():
        try:
            importlib.import_module(name)
        except ImportError:  # no server extra: `serve` says so itself, in its own process
            break
    for module in list(sys.modules.values()):
        if isinstance(module, importlib.util._LazyModule):  # run here once, not in every child
            _ = module.__name__  # any attribute runs a lazy module
    from chronicle.runtime.config import checking_writes

    if checking_writes():
        from chronicle.runtime.stored_vocabulary import stored_vocabulary

        _ = stored_vocabulary()._adapter  # built as the first checked write of a child would build it


def _warm_providers() -> None:
    """The model providers' SDKs, which a command imports when it first calls a model (runtime/providers), and what
    they import only when a client is made and its messages are first reached (HTTP transports, the resources the
    providers call): a quarter of the CPU of the children that ran a turn on the Anthropic wire (py-spy over the
    suite). Only the "models" zygote holds them: in every other they made each fork and exit dearer (33 -> 43 ms of
    user and 48 -> 82 ms of system CPU a command, for memory no such command touches)."""
    import anthropic
    import openai

    anthropic_client = anthropic.AsyncAnthropic(api_key="unused", base_url="http://127.0.0.1:9")
    _ = anthropic_client.messages, anthropic_client.beta.messages, anthropic.AsyncStream
    _ = openai.AsyncOpenAI(api_key="unused", base_url="http://127.0.0.1:9").chat.completions


def _build_deferred() -> None:
    """Build here the validators our pydantic models and adapters defer to their first use (`defer_build`, kept so
    that a command that never validates a message never pays for its schema): every child that ran a turn built
    the same ones again, a twentieth of its CPU. Built, a model is what first use would have left behind."""
    from pydantic import BaseModel, TypeAdapter

    for name, module in list(sys.modules.items()):
        if not name.startswith("chronicle.") or module is None:
            continue
        for value in list(vars(module).values()):
            if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == name:
                value.model_rebuild()  # nothing to do for one built already
            elif isinstance(value, TypeAdapter):
                value.rebuild()


def serve(path: str, kind: str = "") -> None:
    import gc

    preload(kind)
    # What the imports built goes to the permanent generation: a child's collections and its
    # exit then skip it instead of touching (and so copying) every page of it (0.6 s -> 0.08 s
    # a command).
    gc.collect()
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    wake_r, wake_w = os.pipe()
    os.set_blocking(wake_w, False)
    signal.set_wakeup_fd(wake_w)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # only to wake the loop through the wakeup fd
    waiting: dict[int, socket.socket] = {}
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    parent = os.getppid()
    while os.getppid() == parent:  # the test process that started it is gone: so is its use
        for key, _ in selector.select(timeout=2):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                child = _start(conn, listener, wake_r, wake_w, waiting)
                if child:
                    waiting[child] = conn
            else:
                os.read(wake_r, 4096)
        _reap(waiting)


def _start(conn: socket.socket, listener: socket.socket, wake_r: int, wake_w: int, waiting: dict[int, socket.socket]) -> int:
    """Fork the child for one request; its pid (0 when the request was unreadable)."""
    try:
        message, fds, _, _ = socket.recv_fds(conn, 1 << 20, 3)
        request = json.loads(message.decode())
    except (OSError, ValueError):
        conn.close()
        return 0
    pid = os.fork()
    if pid == 0:
        for other in waiting.values():
            other.close()
        listener.close()
        signal.set_wakeup_fd(-1)
        os.close(wake_r)
        os.close(wake_w)
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        conn.close()
        _run(request, fds)  # never returns: the child exits as the CLI would
    for fd in fds:
        os.close(fd)
    conn.sendall(f"{pid}\n".encode())
    return pid


def _run(request: dict, fds: list[int]) -> None:
    os.setsid()  # a process group of its own, as tests/processes.py starts every process: the test kills it whole
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    if hasattr(time, "tzset"):
        time.tzset()  # a TZ of the command's own
    # As `python -m` sets it up: the working directory first, then PYTHONPATH, then the rest.
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [os.getcwd(), *extra, *[p for p in sys.path[1:] if p not in extra]]
    importlib.invalidate_caches()
    from chronicle.runtime.cli import entry
    from chronicle.runtime.cli.entry import main

    sys.argv = [str(Path(str(entry.__file__)).with_name("__main__.py")), *request["argv"]]

    main()
    raise SystemExit(0)


def _reap(waiting: dict[int, socket.socket]) -> None:
    while waiting:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn = waiting.pop(pid, None)
        if conn is not None:
            try:
                conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
            except OSError:
                pass
            conn.close()


# -- the client: what tests/helpers.py's `cli` calls ------------------------------------------------

_ZYGOTE: dict[str, Any] = {}
#: The zygote of commands that may call a model's SDK (`MODEL_ENV`).
_MODELS_ZYGOTE: dict[str, Any] = {}
#: The zygote of `chronicle serve` (`spawn`).
_SERVE_ZYGOTE: dict[str, Any] = {}

#: Read when modules are imported, not when a command runs: rich's consoles (runtime/cli/common.py)
#: take the terminal's size and colours as they are built, the interpreter its PYTHON* settings and
#: the locale (the standard streams' encoding). A command whose environment changes one of these
#: runs in a process of its own.
IMPORT_TIME_ENV = ("COLUMNS", "LINES", "TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE",
                   "TTY_INTERACTIVE", "JUPYTER_COLUMNS", "JUPYTER_LINES", "LANG", "LC_ALL", "LC_CTYPE")


def _same_at_import(env: dict[str, str], zygote: dict[str, str]) -> bool:
    names = set(IMPORT_TIME_ENV) | {k for k in (*env, *zygote) if k.startswith("PYTHON")}
    return all(env.get(name) == zygote.get(name) for name in names)


def _zygote(env: dict[str, str], zygote: dict[str, Any] = _ZYGOTE) -> str | None:
    """The socket of this test process's zygote, started with `env` on first use; None if it cannot start."""
    if os.environ.get("CHRONICLE_TEST_FRESH") == "1" or zygote.get("broken"):
        return None
    if "path" in zygote and zygote["process"].poll() is None:
        return str(zygote["path"])
    import atexit
    import shutil
    import tempfile

    where = tempfile.mkdtemp(prefix="chronicle-zygote-")
    path = os.path.join(where, "socket")
    kind = ["server"] if zygote is _SERVE_ZYGOTE else ["models"] if zygote is _MODELS_ZYGOTE else []
    process = subprocess.Popen([sys.executable, "-m", "tests.cli_zygote", path, *kind], cwd=Path(__file__).parents[1], env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    if process.stdout is None or process.stdout.readline().strip() != "ready":
        process.kill()
        zygote["broken"] = True
        return None

    def stop() -> None:
        process.kill()
        process.wait()
        if process.stdout is not None:  # the "ready" pipe: left open, the collector closed it with a ResourceWarning
            process.stdout.close()
        shutil.rmtree(where, ignore_errors=True)

    atexit.register(stop)
    zygote.update(path=path, process=process, env=env)
    return path


def run(command: list[str], args: list[str], cwd: Path | None, env: dict[str, str], timeout: float,
        input: str | None, zygote_env: dict[str, str]) -> subprocess.CompletedProcess[str] | None:
    """`chronicle ARGS` forked from the zygote, as `subprocess.run(command, ...)` would report it;
    None when it must start from scratch instead (no zygote, or an environment it cannot take)."""
    import locale
    import tempfile

    chosen = _MODELS_ZYGOTE if any(env.get(name) for name in MODEL_ENV) else _ZYGOTE
    path = _zygote(zygote_env, chosen)
    if path is None or not _same_at_import(env, chosen["env"]):
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
                try:
                    os.killpg(pid, signal.SIGKILL)  # with whatever it started
                except ProcessLookupError:  # not yet its own group
                    os.kill(pid, signal.SIGKILL)
                lines.next(timeout=30)
                out.seek(0)
                err.seek(0)
                raise subprocess.TimeoutExpired(command, timeout, output=out.read(), stderr=err.read()) from None
            finally:
                processes.adopt(pid)  # its group: anything it left running ends with the test
        encoding = locale.getpreferredencoding(False)

        def text(stream: Any) -> str:
            stream.seek(0)
            return str(stream.read().decode(encoding).replace("\r\n", "\n").replace("\r", "\n"))  # universal newlines

        return subprocess.CompletedProcess(command, code, text(out), text(err))


def spawn(command: list[str], args: list[str], cwd: Path | None, env: dict[str, str],
          zygote_env: dict[str, str]) -> "Forked | None":
    """`chronicle ARGS` forked from the zygote and left running, as `subprocess.Popen(command,
    stdout=PIPE, stderr=PIPE, text=True)` would start it (stdin is /dev/null); None when it must
    start from scratch instead. For `chronicle serve`, which spends its second of start-up importing
    the server (PRELOAD_SERVE), not serving."""
    path = _zygote(zygote_env, _SERVE_ZYGOTE)
    if path is None or not _same_at_import(env, _SERVE_ZYGOTE["env"]):
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(path)
    except OSError:
        sock.close()
        return None
    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    stdin = os.open(os.devnull, os.O_RDONLY)
    try:
        request = {"argv": args, "env": env, "cwd": str(cwd or os.getcwd())}
        socket.send_fds(sock, [json.dumps(request).encode()], [stdin, out_w, err_w])
    finally:
        for fd in (stdin, out_w, err_w):
            os.close(fd)
    lines = _Lines(sock)
    pid = int(lines.next(timeout=30))
    return processes.adopt(Forked(command, pid, sock, lines, out_r, err_r))


class Forked:
    """The part of `subprocess.Popen` the tests use, for a command the zygote forked: its exit code
    comes over the zygote's connection (the zygote is its parent), signals go to its pid."""

    def __init__(self, args: list[str], pid: int, sock: socket.socket, lines: _Lines, out: int, err: int) -> None:
        import locale

        encoding = locale.getpreferredencoding(False)
        self.args, self.pid, self.returncode = args, pid, None
        self._sock, self._lines = sock, lines
        self.stdin = None
        self.stdout = open(out, encoding=encoding)  # text mode, universal newlines, as Popen(text=True)
        self.stderr = open(err, encoding=encoding)

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                self.wait(timeout=0.001)
            except subprocess.TimeoutExpired:
                pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            try:
                code = self._lines.next(timeout=1e9 if timeout is None else timeout)
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
            self.returncode = int(code)
            self._sock.close()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:  # the zygote has not reaped it: the pid is still this command's
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, timeout: float | None = None) -> tuple[str, str]:
        """Both streams read to their end at once (a full pipe would stall the command), then the exit."""
        import threading

        said: dict[str, str] = {}
        readers = [threading.Thread(target=lambda name=name, stream=stream: said.__setitem__(name, stream.read()), daemon=True)
                   for name, stream in (("out", self.stdout), ("err", self.stderr))]
        for reader in readers:
            reader.start()
        deadline = None if timeout is None else time.monotonic() + timeout
        for reader in readers:
            reader.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
            if reader.is_alive():
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        self.wait(None if deadline is None else max(0.001, deadline - time.monotonic()))
        return said["out"], said["err"]


class _Lines:
    """Lines from a socket, each read with its own timeout (a socket file cannot be read after one)."""

    def __init__(self, sock: Any) -> None:
        self.sock, self.buffer = sock, b""

    def next(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            self.sock.settimeout(min(left, 1e6))
            chunk = self.sock.recv(4096)  # socket.timeout is TimeoutError
            if not chunk:
                raise ConnectionError("the zygote closed the connection without an exit code")
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line.decode()


if __name__ == "__main__":
    serve(sys.argv[1], kind=sys.argv[2] if len(sys.argv) > 2 else "")
