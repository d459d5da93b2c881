"""Loose events handed to the store's session writes, which take aggregates and collect their pending events."""

from __future__ import annotations

from typing import Any


class Pending:
    """An index-log entry (or any event) saved in the same transaction as a session."""

    def __init__(self, *events: Any) -> None:
        self.events = list(events)

    def collect_events(self) -> list[Any]:
        return self.events
