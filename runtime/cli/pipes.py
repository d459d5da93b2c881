"""When the reader of the CLI's output goes away (`chronicle log --json | head -1`, a closed terminal).

Python ignores SIGPIPE, so a write to a pipe nobody reads raises BrokenPipeError: rich's consoles then
raised SystemExit(1) from inside whatever printed (a live renderer, in the middle of a turn), and typer
turned any other into exit 1 with nothing said. `chronicle run … | head -1` stopped its agent between
approving a bash call and starting it, the session left `running` with no process.

Two rules, one per kind of command:
- a command that drives turns (run, chat, resume, worker, serve, demo) calls `keep_going` first: once its
  reader is gone it writes to /dev/null instead, lets every turn run to its end and be recorded, and
  exits as those turns' outcomes say, as if nobody had stopped reading;
- any other command only reads or reports: it stops at once, quietly, with READER_GONE (141, what a shell
  shows for a program that SIGPIPE ended, as `git log | head -1` does), never 1, which says it failed.

Imported by cli/entry.py for every command: the standard library only.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import Any, Iterator

#: The exit code of a command whose reader went away: 128 + SIGPIPE, as a shell reports a program SIGPIPE ended.
READER_GONE = 141

_state = {"keep_going": False, "gone": False}


def closed_streams_opened() -> None:
    """A standard stream that was closed (`chronicle forget S <&-`, a daemon's `>&-`) is /dev/null instead: Python gave
    None for it, and every command crashed on `sys.stdin.isatty()`. And a file the command opens next (the store) no
    longer takes the free descriptor 0, 1 or 2, which a tool's process would inherit as its stdin or stdout."""
    for fd, name, mode in ((0, "stdin", "r"), (1, "stdout", "w"), (2, "stderr", "w")):
        try:
            os.fstat(fd)
            continue
        except OSError:
            pass
        opened = os.open(os.devnull, os.O_RDONLY if mode == "r" else os.O_WRONLY)
        if opened != fd:  # the lowest free descriptor is taken: this one, unless a lower one was closed as well
            os.dup2(opened, fd)
            os.close(opened)
        if getattr(sys, name) is None:
            setattr(sys, name, open(fd, mode, encoding="utf-8", errors="surrogateescape", closefd=False))


def keep_going() -> None:
    """This command drives turns: a reader going away must not abandon one (see the module's docstring)."""
    _state["keep_going"] = True


def reader_gone(stream: Any) -> None:
    """`stream`'s reader went away: what is written to it from now on goes to /dev/null (and so do the bytes it still
    buffers, flushed at exit); then a command that drives turns goes on, any other exits READER_GONE."""
    _state["gone"] = True
    _discard(stream)
    if not _state["keep_going"]:
        raise SystemExit(READER_GONE)


@contextmanager
def reader_may_go() -> Iterator[None]:
    """Around the whole command (cli/entry.py). A broken pipe that got this far, or that typer turned into exit 1 (it
    swaps sys.stdout for a `PacifyFlushWrapper` when it does), ends the command quietly with READER_GONE, or with
    the turns' own code for a command that drives them. What stdout still buffers is flushed here, where a reader
    gone is handled, not at the interpreter's exit, which would print a traceback and exit 120."""
    _state.update(keep_going=False, gone=False)
    was_devnull = _is_devnull(sys.stdout)
    code: Any = None  # None: the command returned (`--version`), and so does this unless its reader has gone
    try:
        yield
    except BrokenPipeError:  # a write outside typer's reach (`--version`): stdout's, as it nearly always is
        _state["gone"], code = True, 1
        _discard(sys.stdout)
    except SystemExit as exc:
        code = exc.code
        if type(sys.stdout).__name__ == "PacifyFlushWrapper":
            _state["gone"] = True
            _discard(sys.stdout)
        elif not was_devnull and _is_devnull(sys.stdout):  # a console of rich's own (typer's help) met it, and did that
            _state["gone"] = True
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except BrokenPipeError:
            _state["gone"] = True
            _discard(stream)
        except (OSError, ValueError):  # closed already: nothing buffered to lose
            pass
    if _state["gone"] and not _state["keep_going"]:
        code = READER_GONE
    if code is not None:
        raise SystemExit(code)


def _is_devnull(stream: Any) -> bool:
    try:
        return os.path.samestat(os.fstat(stream.fileno()), os.stat(os.devnull))
    except (AttributeError, OSError, ValueError):
        return False


def _discard(stream: Any) -> None:
    """Point `stream`'s file descriptor at /dev/null (a stream with none, a test's StringIO, is left as it is)."""
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)
