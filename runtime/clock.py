"""The one place that reads the wall clock; everything below it is handed `now`."""

from __future__ import annotations

from datetime import datetime, timezone


class Clock:
    def now(self) -> datetime:
        return datetime.now(timezone.utc)


SYSTEM_CLOCK = Clock()
