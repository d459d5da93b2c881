"""How far a reader of an index log need not look again: a position below which nothing waits for it.

The routine index (routine_engine.RoutineRunLogged) and the reply index (reply_index.py)
only grow. A reader that looks for what still waits in them (a run's findings not posted yet, a
run not settled yet, a channel's reply not sent yet) would read all of history at every start;
instead it records, in a log of its own, the position of the index at or below which nothing of
its scope waits any more, and a restarted reader starts there.

A checkpoint only ever says something that stays true: what it passes over was posted, settled,
erased, or had nothing to report, which no later event undoes. So a stale checkpoint (a lower
one, written by a slower reader, or none at all) only costs reading; readers take the highest one
they know. Each write takes the slot after the last one its reader read, so a reader that has not
seen a higher checkpoint written meanwhile collides instead of writing a lower one after it; the
loser learns the higher one and loses nothing but that write.
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator
from uuid import UUID

from eventsourcing.application import EventSourcedLog
from eventsourcing.domain import DomainEvent
from eventsourcing.persistence import IntegrityError

from chronicle.domain.ids import CHRONICLE_NS, uuid5

from .store import ChronicleStore


class IndexCheckpointed(DomainEvent):
    """Every entry of `index` at or below `position` is done with, for this log's reader and scope."""

    index: UUID
    position: int


def checkpoint_log(store: ChronicleStore, index: UUID, reader: str, scope: str) -> EventSourcedLog[IndexCheckpointed]:
    """One log per (index, reader, scope): the outbox's notices of one workspace do not wait for another's."""
    return EventSourcedLog(store.events, uuid5(CHRONICLE_NS, f"/checkpoints/{index}/{reader}\n{scope}"), IndexCheckpointed)


class Checkpoint:
    """A reader's checkpoint of one index: read once at its start, advanced as what waited is done with."""

    def __init__(self, store: ChronicleStore, index: UUID, reader: str, scope: str) -> None:
        self.log = checkpoint_log(store, index, reader, scope)
        self.index = index
        self.store = store
        self.position: int | None = None  # the highest known; None: none yet (read the index from its start)
        self.last_version: int | None = None

    def read(self) -> int | None:
        """The checkpoint recorded last: a writer must have read every earlier slot, so it is the highest."""
        last = self.log.get_last()
        if last is not None:
            self.last_version = last.originator_version
            self.position = last.position if self.position is None else max(self.position, last.position)
        return self.position

    def advance(self, position: int) -> bool:
        """Record that nothing at or below `position` waits; False if that is known already or another reader
        took the log's next slot (it is written again at the next advance)."""
        if self.position is not None and position <= self.position:
            return False
        version = 1 if self.last_version is None else self.last_version + 1
        entry = self.log.trigger_event(next_originator_version=version, index=self.index, position=position)
        try:
            self.store.save(entry)
        except IntegrityError:
            self.read()  # another reader wrote: learn its slot (and perhaps a higher position) for the next try
            return False
        self.position, self.last_version = position, version
        return True


class CheckpointedRead:
    """One reader's way through an index: from its checkpoint at the first look, then from where the last
    look stopped; and the checkpoint moved up to just below the first entry that still waits."""

    def __init__(self, store: ChronicleStore, index: UUID, reader: str, scope: str) -> None:
        self.store, self.index, self.reader, self.scope = store, index, reader, scope
        self.checkpoint: Checkpoint | None = None  # read at the first look
        #: The position of the last entry read; None while nothing is (no checkpoint, nothing in the index).
        self.cursor: int | None = None

    def new(self, log: EventSourcedLog[Any]) -> Iterator[Any]:
        """The index entries written since the last look (since the checkpoint, at the first)."""
        if self.checkpoint is None:
            checkpoint = Checkpoint(self.store, self.index, self.reader, self.scope)
            self.cursor = checkpoint.read()  # kept once read: a lost database tries again at the next look
            self.checkpoint = checkpoint
        for entry in log.get(gt=self.cursor):
            self.cursor = entry.originator_version
            yield entry

    def advance_below(self, waiting: Iterable[int]) -> None:
        """Record that nothing waits below the first of `waiting` (positions), or up to the last entry read."""
        if self.checkpoint is None or self.cursor is None:
            return
        self.checkpoint.advance(min(waiting, default=self.cursor + 1) - 1)
