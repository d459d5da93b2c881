"""Many aggregates as they are now, read with two queries per few hundred instead of two each.

A cold process that continues, forks or shows a session reads every turn on its branch, and
`resume --all`, a worker's self-repair and the reply outbox read every session of the store: one
repository get each is a snapshot query, an events query and a replay, ≈ 0.35 ms for a turn, so
25 earlier turns were most of the first step of a fork and 3,000 sessions a second of `resume
--all`. Here the newest snapshot of each aggregate and the events after it are read for all of them
together (a session's later events selected in the query, a turn's skipped in Python: see
`load_turns`), then each is replayed as the repository would. One that does not load this
way (erased by `forget`, an unreadable row, a snapshot that does not decode) is read alone, so it
fails, or loads, exactly as `store.turn` / `store.session` does.
"""

from __future__ import annotations

from typing import Any, Callable
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from chronicle.domain.turn import Turn

from .snapshot_store import decode_snapshot
from .store_rows import as_uuid, event_rows, events_after_snapshots, newest_snapshot_rows

#: Ids per query: far below SQLite's parameter limit.
CHUNK = 400


def load_turns(store: Any, turn_ids: list[UUID]) -> dict[UUID, Turn]:
    """A Turn keeps only its newest snapshot and most have none, so all their events are selected: filtering by
    snapshot in the query cost a cold PostgreSQL fork ≈ 0.25 ms more than skipping the few rows in Python."""
    return load_many(store, turn_ids, Turn, store.turn, every_event=True)


def load_many(store: Any, ids: list[UUID], cls: type, alone: Callable[[UUID], Any], every_event: bool = False) -> dict[UUID, Any]:
    """`every_event`: select each aggregate's events from its first, not only those after its newest snapshot."""
    found: dict[UUID, Any] = {}
    for start in range(0, len(ids), CHUNK):
        found.update(_chunk(store, ids[start:start + CHUNK], cls, alone, every_event))
    return found


def _chunk(store: Any, ids: list[UUID], cls: type, alone: Callable[[UUID], Any], every_event: bool) -> dict[UUID, Any]:
    states: dict[UUID, Any] = {}
    failed: set[UUID] = set()
    try:
        for originator_id, version, topic, state in newest_snapshot_rows(store, ids):
            key = as_uuid(originator_id)
            snapshot = decode_snapshot(store.snapshots.mapper, _stored(key, version, topic, state))
            if snapshot is None:  # perhaps only the events after it are selected: read this one alone
                failed.add(key)
            else:
                states[key] = snapshot.mutate(None)
        for _, originator_id, version, topic, state in (event_rows if every_event else events_after_snapshots)(store, ids):
            key = as_uuid(originator_id)
            if key in failed or (key in states and version <= states[key].version):
                continue
            try:
                states[key] = store.mapper.to_domain_event(_stored(key, version, topic, state)).mutate(states.get(key))
            except Exception:  # noqa: BLE001 - read alone below, so the error is the single read's
                failed.add(key)
    except Exception:  # noqa: BLE001 - a snapshot that does not load: every aggregate of the chunk alone
        states, failed = {}, set(ids)
    out = {}
    for aggregate_id in ids:
        aggregate = states.get(aggregate_id)
        out[aggregate_id] = aggregate if aggregate_id not in failed and isinstance(aggregate, cls) else alone(aggregate_id)
    return out


def _stored(originator_id: UUID, version: int, topic: str, state: Any) -> StoredEvent:
    return StoredEvent(originator_id=originator_id, originator_version=version, topic=topic, state=bytes(state))
