"""The error the public API raises for a request it cannot carry out: the application layer's own.

`code` is the exit code the CLI gives the same failure (2: the request is wrong; 1: the state
forbids it now), so a program and the command line classify failures alike.
"""

from __future__ import annotations

from chronicle.runtime.app.errors import AppError as ChronicleError


class ChronicleWarning(UserWarning):
    """Something the program gave that Chronicle does not use, said rather than dropped silently: e.g. an Agent's
    tools given to a continued session, which keeps the ones it recorded. The same words are on RunResult.notes;
    the CLI prints them as `note:` lines."""


__all__ = ["ChronicleError", "ChronicleWarning"]
