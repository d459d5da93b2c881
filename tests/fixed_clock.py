"""A clock that says what a test sets (`clock.at = ...`): routines, guards and self-repair read time from a clock."""

from __future__ import annotations

from datetime import datetime


class Clock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def now(self) -> datetime:
        return self.at
