"""The error the public API raises for a request it cannot carry out: the application layer's own.

`code` is the exit code the CLI gives the same failure (2: the request is wrong; 1: the state
forbids it now), so a program and the command line classify failures alike.
"""

from __future__ import annotations

from chronicle.runtime.app.errors import AppError as ChronicleError

__all__ = ["ChronicleError"]
