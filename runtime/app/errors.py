"""The one error a use case raises for a request it cannot carry out; clients choose how to show it.

`code` is the exit code the CLI uses for it (2: the request is wrong — a bad argument, an unknown
id, a setting that cannot work; 1: the request is fine but the state forbids it now; 3: paused for
an approval), so every client reports the same failure the same way without re-deciding it.
"""

from __future__ import annotations


class AppError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def first_line(exc: BaseException) -> str:
    """An exception's message as one line (its type's name when it has none): what an error line shows."""
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]
