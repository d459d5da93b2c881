"""Snapshots are caches: one that does not decode is passed over and the aggregate is loaded from
its events, as if the snapshot had never been taken.

eventsourcing's repository reads the newest snapshot and replays the events after it, so a snapshot
damaged by hand (a byte changed, text written where bytes were) failed every read of its aggregate:
`history`, `replay`, continuing the session. Nothing is recorded about it (a cache miss is not a
fact of the session); a warning names it once per process, `chronicle doctor` lists it
(`unreadable_snapshot`) and `doctor --repair` deletes it. `verify` still fails on it, since a
snapshot that does not decode is not what its events say. Passing over it costs a replay from the
aggregate's first event, not from an older snapshot: a Turn keeps only its newest one anyway.
"""

from __future__ import annotations

import logging
from typing import Any, Iterator, Sequence
from uuid import UUID

from eventsourcing.persistence import EventStore, StoredEvent
from eventsourcing.sqlite import SQLiteAggregateRecorder, SQLiteCursor

from .shred_marks import refuse_forgotten_sqlite, trees_of

log = logging.getLogger("chronicle")

#: (aggregate id, version) of each snapshot already warned about in this process.
_warned: set[tuple[UUID, int]] = set()


def decode_snapshot(mapper: Any, stored: StoredEvent) -> Any | None:
    """The stored snapshot decoded, or None (with a warning the first time) if it does not decode.

    A snapshot of a forgotten session tree (`chronicle forget`) raises as before: its events are
    erased too, and readers say so."""
    try:
        return mapper.to_domain_event(stored)
    except Exception as exc:
        from .shred_marks import forgotten_cause

        if forgotten_cause(exc) is not None:
            raise
        key = (UUID(str(stored.originator_id)), stored.originator_version)
        if key not in _warned:
            _warned.add(key)
            log.warning("the snapshot of %s at version %d does not decode (%s); its events are loaded instead. "
                        "`chronicle doctor --repair` deletes it", key[0], key[1], why(exc))
        return None


def why(exc: BaseException) -> str:
    """What went wrong, without eventsourcing's wrapper (its message repeats the topic and id)."""
    root = exc.__cause__ or exc
    first = str(root).splitlines()[0] if str(root) else ""
    return f"{type(root).__name__}: {first}" if first else type(root).__name__


class SnapshotStore(EventStore[UUID]):
    """The store's snapshot store: eventsourcing's, passing over a snapshot that does not decode."""

    def get(  # type: ignore[override]
        self, originator_id: UUID, *, gt: int | None = None, lte: int | None = None, desc: bool = False, limit: int | None = None,
    ) -> Iterator[Any]:
        for stored in self.recorder.select_events(originator_id=originator_id, gt=gt, lte=lte, desc=desc, limit=limit):
            snapshot = decode_snapshot(self.mapper, stored)
            if snapshot is not None:
                yield snapshot


class SQLiteSnapshotRecorder(SQLiteAggregateRecorder):
    """eventsourcing's SQLite snapshots table, refusing a snapshot sealed with the key of a session tree
    that was forgotten, in the insert's own transaction: after the INSERT, which holds SQLite's single
    write lock, so a forget (a write too) from any process is either before it and seen, or after its
    commit, as for an event save (runtime/chain.py). A statement in this process, no round trip."""

    def _insert_events(self, c: SQLiteCursor, stored_events: Sequence[StoredEvent], **kwargs: Any) -> Sequence[int] | None:
        inserted = super()._insert_events(c, stored_events, **kwargs)
        trees = trees_of(s.state for s in stored_events)
        if trees:
            refuse_forgotten_sqlite(c, sorted(trees))
        return inserted
