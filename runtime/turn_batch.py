"""Many turns as they are now, read with two queries per few hundred turns instead of two each.

A cold process that continues, forks or shows a session reads every turn on its branch: one
repository get per turn is a snapshot query, an events query and a replay, ≈ 0.35 ms each, so
25 earlier turns were most of the first step of a fork. Here the newest snapshot of each turn
(a Turn keeps only its newest, see `ChronicleStore.take_snapshot`) and the events of all of
them are selected together; only events after a turn's snapshot are decoded, then each turn is
replayed as the repository would. A turn that does not load this way (erased by `forget`, an
unreadable row) is read alone, so it fails exactly as `store.turn` does.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from chronicle.domain.turn import Turn

from .snapshot_store import decode_snapshot
from .store_rows import as_uuid, event_rows, snapshot_rows

#: Ids per query: far below SQLite's parameter limit.
CHUNK = 400


def load_turns(store: Any, turn_ids: list[UUID]) -> dict[UUID, Turn]:
    found: dict[UUID, Turn] = {}
    for start in range(0, len(turn_ids), CHUNK):
        found.update(_chunk(store, turn_ids[start:start + CHUNK]))
    return found


def _chunk(store: Any, ids: list[UUID]) -> dict[UUID, Turn]:
    states: dict[UUID, Any] = {}
    failed: set[UUID] = set()
    try:
        for originator_id, version, topic, state in snapshot_rows(store, ids):
            key = as_uuid(originator_id)
            snapshot = decode_snapshot(store.snapshots.mapper, _stored(key, version, topic, state))
            if snapshot is not None:  # one that does not decode is passed over: the turn is read from its events
                states[key] = snapshot.mutate(None)
        for _, originator_id, version, topic, state in event_rows(store, ids):
            key = as_uuid(originator_id)
            if key in failed or (key in states and version <= states[key].version):
                continue
            try:
                states[key] = store.mapper.to_domain_event(_stored(key, version, topic, state)).mutate(states.get(key))
            except Exception:  # noqa: BLE001 - read alone below, so the error is store.turn's
                failed.add(key)
    except Exception:  # noqa: BLE001 - a snapshot that does not load: every turn of the chunk alone
        states, failed = {}, set(ids)
    out = {}
    for turn_id in ids:
        turn = states.get(turn_id)
        out[turn_id] = turn if turn_id not in failed and isinstance(turn, Turn) else store.turn(turn_id)
    return out


def _stored(originator_id: UUID, version: int, topic: str, state: Any) -> StoredEvent:
    return StoredEvent(originator_id=originator_id, originator_version=version, topic=topic, state=bytes(state))
