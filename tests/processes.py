"""The processes a test starts: each leads a process group of its own, and every group is killed and its leader reaped
when the test ends, whether it passed or failed.

A test that failed (an assertion, a timeout) between starting a `chronicle` process and stopping it left the process
running: a worker polling a finished test's database, a server holding a port, a run waiting for a gate file that
never comes, and whatever those had started. `start` is `subprocess.Popen` with the child in a new session, so its
group holds what it starts too; the autouse fixture `processes_ended` (tests/conftest.py) calls `end_all` after every
test. Commands forked from the CLI zygote (tests/cli_zygote.py) lead groups of their own as well and are noted here
by `adopt`. A leader still running at the end is killed with everything below it, the bash tool's commands included
(they make sessions of their own, which its group's death would leave running).

A group is killed by its leader's pid even when the test has reaped the leader already: what it left in the group is
what would be orphaned. Linux keeps a pid in use while a process group of that id has members, so the id cannot have
passed to another group meanwhile, unless the group emptied and the pid counter wrapped round during the test.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

#: What the running test started, in order: Popen objects, the zygote's `Forked` ones, or bare group ids.
_started: list[Any] = []


def start(command: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
    """`subprocess.Popen(command, **kwargs)` in a session (and so a process group) of its own, ended with the test."""
    if kwargs.pop("start_new_session", True) is not True:
        raise ValueError("a test's process leads a group of its own: tests/processes.py kills the group")
    process: subprocess.Popen[Any] = subprocess.Popen(command, start_new_session=True, **kwargs)
    _started.append(process)
    return process


def run(command: list[str], input: str | None = None, timeout: float | None = None, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(command, capture_output=True, text=True, ...)`, killing the whole group on a timeout."""
    process = start(command, stdin=subprocess.PIPE if input is not None else None, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True, **kwargs)
    try:
        out, err = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        out, err = process.communicate()
        raise subprocess.TimeoutExpired(process.args, timeout or 0, output=out, stderr=err) from None
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def read_terminal(main: int) -> bytes:
    """Everything written to a pseudo-terminal (`pty.openpty()`'s `main` side) until the program's end closes it;
    closes `main`. The other side must already be closed here, or this waits for ever."""
    seen = b""
    try:
        while chunk := os.read(main, 65536):
            seen += chunk
    except OSError:  # the other end closed (Linux says EIO rather than an empty read)
        pass
    os.close(main)
    return seen


def adopt(process: Any) -> Any:
    """End `process` (a Popen or a zygote's Forked, leading a group of its own) or a bare group id with the test."""
    _started.append(process)
    return process


def stop(process: Any, timeout: float = 30) -> None:
    """A test's cleanup of a process it started: killed with its group and everything below it, and reaped. `kill()`
    alone left what the process had started running (a bash tool's command waiting for a gate that never opens)."""
    if process.poll() is None:
        _kill_tree(process.pid)
    _kill_group(process.pid)
    process.wait(timeout=timeout)


def end_all(timeout: float = 30) -> list[str]:
    """Kill every group the test started and reap its leader; what was still running, one line each."""
    left: list[str] = []
    while _started:
        item = _started.pop()
        if isinstance(item, int):
            _kill_group(item)
            continue
        if item.poll() is None:
            left.append(f"pid {item.pid}: {' '.join(str(a) for a in item.args)[:200]}")
            _kill_tree(item.pid)
        _kill_group(item.pid)
        try:
            item.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            left.append(f"pid {item.pid} did not die within {timeout:.0f} s of SIGKILL")
        except OSError as exc:  # a zygote's child whose zygote is gone: its exit code with it
            left.append(f"pid {item.pid}: {exc}")
        for stream in (item.stdin, item.stdout, item.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
    return left


def _kill_tree(pid: int) -> None:
    """Kill a running leader's group and every process below it, in other sessions too (the bash tool makes one
    per command, which its group's death would orphan): each is stopped first, so that none starts another unseen."""
    _signal_group(pid, signal.SIGSTOP)
    stopped: set[int] = set()
    while found := descendants(pid) - stopped:
        for child in found:
            _signal(child, signal.SIGSTOP)
        stopped |= found
    _signal_group(pid, signal.SIGKILL)
    for child in stopped:
        _signal(child, signal.SIGKILL)


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_group(pgid: int) -> None:
    _signal_group(pgid, signal.SIGKILL)


#: read(2)'s number in /proc/PID/syscall, by machine.
_READ_SYSCALL = {"x86_64": 0, "aarch64": 63}


def reading_stdin(pid: int) -> bool:
    """Whether the process's main thread is blocked in read(2) on its standard input (Linux /proc). A signal sent now
    interrupts that read; one sent while the process was still on its way to it (a prompt printed, the read not yet
    begun) is acted on by Python only once the read returns."""
    import platform

    try:
        fields = Path(f"/proc/{pid}/syscall").read_text().split()
    except OSError:
        return False
    number = _READ_SYSCALL.get(platform.machine())
    return number is not None and len(fields) > 1 and fields[0] == str(number) and int(fields[1], 16) == 0


def descendants(pid: int) -> set[int]:
    """Every living process below `pid` (Linux /proc). Stop `pid` first (SIGSTOP) for a list that cannot grow."""
    children: dict[int, list[int]] = {}
    if not Path("/proc/self/stat").exists():  # no /proc: the groups are killed all the same
        return set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])  # the field after the state, past a name that may hold ")"
        children.setdefault(parent, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def gone(pid: int) -> bool:
    """No such process, or one that has ended and waits to be reaped (a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] == "Z"


def wait_gone(pids: set[int], timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not all(gone(pid) for pid in pids):
        if time.monotonic() > deadline:
            raise AssertionError(f"still running after {timeout:.0f} s: {sorted(p for p in pids if not gone(p))}")
        time.sleep(0.02)
