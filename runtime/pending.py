"""Loose events handed to the store's session writes, which take aggregates and collect their pending events."""

from __future__ import annotations

from typing import Any, Callable


class Pending:
    """An index-log entry (or any event) saved in the same transaction as a session."""

    def __init__(self, *events: Any) -> None:
        self.events = list(events)

    def collect_events(self) -> list[Any]:
        return self.events


class NextEntry:
    """An index-log entry whose slot is the log's next one at each attempt of a session's creation.

    Creators racing for the same index log take slots in turn; a `Pending` entry made once keeps the
    slot it was made for, so a creator that lost it could never save (`chronicle jobs submit` from
    several processes at once failed with an IntegrityError). `ChronicleStore.create_session` calls
    `make()` again on each attempt, as it triggers its own session-index entry again."""

    def __init__(self, make: Callable[[], Any]) -> None:
        self.make = make
