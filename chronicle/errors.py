"""The error the public API raises for a request it cannot carry out: the application layer's own.

`code` is the exit code the CLI gives the same failure (2: the request is wrong; 1: the state
forbids it now), so a program and the command line classify failures alike.
"""

from __future__ import annotations

import sys
import warnings

from chronicle.runtime.app.errors import AppError as ChronicleError

#: Packages whose frames a note is not attributed to: ours, and what runs between the program's call and
#: where the note is found (pydantic's argument check, asyncio running `run_sync`'s coroutine).
INTERNAL = frozenset({"chronicle", "pydantic", "pydantic_core", "asyncio", "contextlib", "functools", "concurrent", "threading"})


class ChronicleWarning(UserWarning):
    """Something the program gave that Chronicle does not use, said rather than dropped silently: e.g. an Agent's
    tools given to a continued session, which keeps the ones it recorded. The same words are on RunResult.notes;
    the CLI prints them as `note:` lines."""


def warn(note: str) -> None:
    """A ChronicleWarning attributed to the program's own line, which a fixed `stacklevel` cannot find: the
    call may come through `run_sync`'s event loop, `await run`, or pydantic's argument check, each with
    frames of its own in between. (Python 3.12's `skip_file_prefixes` does this; 3.11 is supported.)"""
    frame, level = sys._getframe(1), 2
    while frame.f_back is not None and frame.f_globals.get("__name__", "").partition(".")[0] in INTERNAL:
        frame, level = frame.f_back, level + 1
    warnings.warn(note, ChronicleWarning, stacklevel=level)


def warn_at(note: str, exc: BaseException) -> None:
    """A ChronicleWarning attributed to the line that raised `exc` (the deepest frame of its traceback): a program's
    callback that failed inside a run, whose own line says more than the call that started the run."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    if tb is None:
        warn(note)
        return
    frame = tb.tb_frame
    warnings.warn_explicit(note, ChronicleWarning, frame.f_code.co_filename, tb.tb_lineno,
                           module=frame.f_globals.get("__name__"), module_globals=frame.f_globals)


__all__ = ["ChronicleError", "ChronicleWarning", "warn"]
