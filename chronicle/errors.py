"""The error the public API raises for a request it cannot carry out."""

from __future__ import annotations


class ChronicleError(Exception):
    """`code` is the exit code the CLI gives the same failure (2: the request is wrong; 1: the state forbids it now)."""

    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code
