"""The bash tool: its own process group, a scrubbed environment, bounded output, a hard deadline.

The command runs in a new session (process group) so a timeout or a cancel kills every child
it started. Its output is read as it comes, into a bounded head and tail: a command printing
gigabytes costs a few hundred kilobytes of memory, and its output keeps being drained (and
counted) so the command is never blocked on a full pipe. The deadline is checked while output
streams, so `yes` or `cat /dev/zero` end at the timeout like any other command. Once the shell
exits, output still held open by a background child is read for a moment, then left.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from typing import Callable

from pydantic import BaseModel, Field

from .base import MAX_OUTPUT_CHARS, Tool, ToolContext, ToolOutput
from .tool_env import tool_env

#: Bytes kept from the start and from the end of the output; the middle is counted, not kept.
#: Together they fit the result limit, so the end of the output (where errors are) is shown too.
KEEP_BYTES = MAX_OUTPUT_CHARS // 2
READ_CHUNK = 1 << 16
#: How long output still open after the shell exited (a background child) is read.
LINGER_S = 0.5


class OutputTail:
    """The first and last KEEP_BYTES of a stream, and how much was skipped between them."""

    def __init__(self, keep: int = KEEP_BYTES) -> None:
        self.keep = keep
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.keep - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > 2 * self.keep:
                del self.tail[: len(self.tail) - self.keep]

    def text(self) -> str:
        tail = bytes(self.tail[-self.keep:])
        skipped = self.total - len(self.head) - len(tail)
        head = self.head.decode("utf-8", errors="replace")
        if not tail:
            return head
        middle = f"\n[… {skipped} bytes of output not shown …]\n" if skipped else ""
        return head + middle + tail.decode("utf-8", errors="replace")


class Bash(Tool):
    name = "bash"
    description = (
        "Run a shell command in the workspace directory; returns its output and exit code. "
        "The environment holds PATH, HOME, locale and terminal settings only, plus variables the operator allows."
    )
    requires_approval = True

    class Input(BaseModel):
        command: str = Field(min_length=1)
        timeout_s: float | None = Field(None, gt=0, description="Seconds before the command is killed")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        timeout = min(args.timeout_s or ctx.timeout_s, ctx.timeout_s)
        env = tool_env(ctx.workspace.resolve())
        output = OutputTail()
        read_fd, write_fd = os.pipe()
        try:
            process = subprocess.Popen(  # noqa: ASYNC220 - fork+exec returns at once; the wait is async below
                args.command, shell=True, cwd=ctx.workspace, env=env, stdin=subprocess.DEVNULL,
                stdout=write_fd, stderr=write_fd, start_new_session=True,
            )
        finally:
            os.close(write_fd)
        timed_out = await _supervise(process, read_fd, output, timeout, Progress(ctx).seen)
        text = _clean(output.text())
        if timed_out:
            shown = f"; output so far:\n{text}" if text else ""
            return ToolOutput(f"command timed out after {timeout:g} s and was killed{shown}", is_error=True)
        code = process.returncode
        body = text or "(no output)"
        return ToolOutput(f"{body}\n[exit code {code}]", is_error=code != 0)


class Progress:
    """The command's newest line as a live `tool_update`, at most every `EVERY_S`: a long build or test
    run shows it is alive, not a silent spinner. Only what is printed live; the result keeps the output.

    A chunk costs one `rfind` and a short slice: only the bytes that can hold the newest complete line
    are kept, and they are split into lines only when an update may be shown. Splitting every chunk cost
    ~0.5 s of event-loop time per 20 MB of short lines, time taken from every other session in the process."""

    EVERY_S = 0.25
    #: Bytes kept of the newest line; a longer line is shown by its end, cut to UPDATE_CHARS anyway.
    KEEP = 4096

    def __init__(self, ctx: ToolContext, clock: Callable[[], float] = time.monotonic) -> None:
        self.ctx = ctx
        self.clock = clock
        self.last = clock()  # a command done within EVERY_S shows no progress: its result follows at once
        self.partial = b""  # the line being printed, not yet ended by a newline
        self.newest = b""  # the end of the output up to its last newline: the newest complete line is in it

    def seen(self, chunk: bytes) -> None:
        end = chunk.rfind(b"\n")
        if end < 0:
            self.partial = (self.partial + chunk)[-self.KEEP:]
        else:
            start = max(end - self.KEEP, 0)
            ended = chunk[start:end] if start else self.partial + chunk[:end]
            self.partial = chunk[end + 1:][-self.KEEP:]
            if ended.strip():  # blank lines do not hide the line printed before them
                self.newest = ended
        if not self.newest:
            return
        now = self.clock()
        if now - self.last < self.EVERY_S:
            return
        line = next(line for line in reversed(self.newest.split(b"\n")) if line.strip())
        self.newest = b""
        self.last = now
        self.ctx.update(_clean(line.decode("utf-8", "replace")).rstrip("\r"))


#: The commands running now, for a process that must stop at once (a worker's second SIGTERM) and so has no moment
#: to cancel each call: their process groups are killed, as a cancel or a timeout kills them, not left orphaned.
_RUNNING: set[subprocess.Popen[bytes]] = set()


def kill_running_commands() -> int:
    """Kill every running command's process group; how many there were."""
    running = list(_RUNNING)
    for process in running:
        _kill_group(process)
    return len(running)


async def _supervise(process: subprocess.Popen[bytes], read_fd: int, output: OutputTail, timeout: float,
                     on_output: Callable[[bytes], None] | None = None) -> bool:
    """Read output until the command ends or the deadline passes; True if it was killed for time."""
    _RUNNING.add(process)
    try:
        return await _read_until_done(process, read_fd, output, timeout, on_output)
    finally:
        _RUNNING.discard(process)


async def _read_until_done(process: subprocess.Popen[bytes], read_fd: int, output: OutputTail, timeout: float,
                           on_output: Callable[[bytes], None] | None) -> bool:
    loop = asyncio.get_running_loop()
    eof = asyncio.Event()

    def readable() -> None:
        try:
            chunk = os.read(read_fd, READ_CHUNK)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if chunk:
            output.add(chunk)
            if on_output is not None:
                on_output(chunk)
        else:
            loop.remove_reader(read_fd)
            eof.set()

    os.set_blocking(read_fd, False)
    loop.add_reader(read_fd, readable)
    deadline = loop.time() + timeout
    pause = 0.005
    try:
        while process.poll() is None:
            if loop.time() >= deadline:
                _kill_group(process)
                return True
            await asyncio.sleep(min(pause, max(deadline - loop.time(), 0)))
            pause = min(pause * 1.5, 0.1)
        try:
            await asyncio.wait_for(eof.wait(), timeout=min(LINGER_S, max(deadline - loop.time(), 0.01)))
        except TimeoutError:
            pass
        return False
    finally:
        loop.remove_reader(read_fd)
        os.close(read_fd)
        if process.poll() is None:  # cancelled or timed out: nothing it started may outlive the call
            _kill_group(process)
        await asyncio.to_thread(process.wait)


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _clean(text: str) -> str:
    """NUL cannot be stored by PostgreSQL or shown; the rest of the output is kept as is."""
    return text.replace("\x00", "\\0")
