"""Run `chronicle ARGS` in a fresh process without paying for interpreter start-up and imports.

The suite runs the real CLI some 800 times, and each run spent most of its second starting
Python and importing the commands before doing anything. A zygote process imports the CLI and
its commands once; each command then runs in a child forked from it, with its own standard
streams, working directory, environment and `sys.argv`, and exits as `python -m
chronicle.runtime.cli` would (atexit handlers, thread shutdown, the exit status). What the child
inherits is only what importing the code left behind, which a fresh process would build the
same way; nothing in Chronicle reads the environment or the working directory at import (a
test in tests/unit checks the commands' import lists separately, in real fresh processes).

Protocol, one Unix-socket connection per command: the client sends stdin/stdout/stderr as file
descriptors (SCM_RIGHTS) with one JSON line {argv, env, cwd}; the zygote answers the child's
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
import sys
import time
from pathlib import Path

#: What every child needs imported; each command module is imported as well (runtime/cli/app.py's
#: table), so a command finds its own code loaded.
PRELOAD = ("chronicle.runtime.cli.entry", "chronicle.runtime.cli.app")


def preload() -> None:
    for name in PRELOAD:
        importlib.import_module(name)
    from chronicle.runtime.cli.app import COMMANDS

    for command in COMMANDS:
        importlib.import_module("chronicle.runtime.cli." + command.target.split(":")[0])


def serve(path: str) -> None:
    import gc

    preload()
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
    sys.argv = [str(Path(sys.modules["chronicle.runtime.cli.entry"].__file__).with_name("__main__.py")), *request["argv"]]
    from chronicle.runtime.cli.entry import main

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


if __name__ == "__main__":
    serve(sys.argv[1])
