"""What a projection is: named tables, and a handler per event kind that writes them.

A projection is a pure function of the log: handlers read only the event, its position and
the projection's own tables, never the aggregates (which may be newer than the event) and
never a clock. That is what makes a rebuild from zero give exactly the incremental rows.
Events a projection does not handle still advance its position.
"""

from __future__ import annotations

from typing import Any, Callable

from .sql import Tx

Handler = Callable[[Any, Tx, Any, int], None]
#: What every projection's tracking key starts with.
KEY_PREFIX = "projection:"


def on(*events: str | type) -> Callable[[Handler], Handler]:
    """Mark a method as the handler of these event classes (``Turn.ModelResponded``), or of events
    named like ``"Turn.ModelResponded"`` for classes a projection cannot import (index logs)."""

    def mark(method: Handler) -> Handler:
        method.__dict__.setdefault("_handles", []).extend(e if isinstance(e, str) else e.__qualname__ for e in events)
        return method

    return mark


class Projection:
    #: Names the tracking row and the CLI argument of `projections rebuild NAME`.
    name: str = ""
    #: Bump when the tables change: the projection is then dropped and rebuilt on first use.
    version: int = 1
    #: Table name -> column definitions (portable SQL).
    tables: dict[str, str] = {}
    #: Extra statements run after the tables are created (indexes).
    indexes: tuple[str, ...] = ()

    def __init__(self) -> None:
        self._handlers: dict[str, Handler] = {}
        for klass in reversed(type(self).__mro__):
            for attr in vars(klass).values():
                for event_name in getattr(attr, "_handles", ()):
                    self._handlers[event_name] = attr

    @property
    def key(self) -> str:
        return f"{self.versions}{self.version}"

    @property
    def versions(self) -> str:
        """What the tracking key of every version of this projection starts with."""
        return f"{KEY_PREFIX}{self.name}:v"

    def process(self, tx: Tx, event: Any, position: int) -> None:
        handler = self._handlers.get(type(event).__qualname__)
        if handler is not None:
            handler(self, tx, event, position)
        else:
            self.unhandled(tx, event, position)

    def unhandled(self, tx: Tx, event: Any, position: int) -> None:
        """Events with no handler; a projection may still want to see them (audit does)."""

    def passed_over(self, tx: Tx, position: int, originator_id: Any) -> None:
        """An event at `position` that could not be decoded, so no handler saw it. A reader that
        must answer exactly as the aggregates would (summaries, for `sessions`) notes it: the
        aggregate path skips or fails on such a session, and the reader then defers to it."""

    def create(self, tx: Tx) -> None:
        for table, columns in self.tables.items():
            tx.execute(f"CREATE TABLE IF NOT EXISTS {table} ({columns})")
        for statement in self.indexes:
            tx.execute(statement)

    def drop(self, tx: Tx) -> None:
        for table in self.tables:
            tx.execute(f"DROP TABLE IF EXISTS {table}")
