"""Snapshots are not chained; `verify` proves them another way: each must equal its events.

A snapshot is a cache taken after the events it sums up were committed, and Turn snapshots are
pruned (runtime/store_snapshots.py), so a link per snapshot would either break the chain's append-only
order or leave pruned links dangling. But loading trusts the newest snapshot over the events
before it, so a forged snapshot would change what `history` and the loop read while every link
still verifies. So `verify` re-derives each stored snapshot from the chained events up to its
version and compares: a snapshot that differs was edited or slipped in, and is named like a
broken link (kind `snapshot`). A snapshot written by an earlier schema is compared after its
upcasters ran, on what it holds (a field they could only fill with None is not held against it).
A snapshot that does not decode is reported the same way; one of
a forgotten session tree (`chronicle forget`) cannot be read by anyone and is passed over.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence
from uuid import UUID

from eventsourcing.domain import Snapshot
from eventsourcing.persistence import StoredEvent

from .store_rows import SQLITE_STATE


@dataclass(frozen=True)
class SnapshotProblem:
    aggregate_id: UUID
    version: int
    topic: str
    detail: str


#: Aggregate ids per query when only some aggregates' snapshots are read (SQLite's bound-parameter limit is far above).
_CHUNK = 500


def stored_snapshots(store: Any, originator_ids: Sequence[UUID] | None = None) -> Iterator[StoredEvent]:
    """Every stored snapshot, or only those of `originator_ids` (`verify SESSION`: its tree's)."""
    if store.snapshots is None:
        return
    recorder: Any = store.snapshots.recorder
    table = recorder.events_table_name
    sqlite = store.backend == "sqlite"
    if sqlite:
        select = f"SELECT originator_id, originator_version, topic, {SQLITE_STATE} FROM {table}"
    else:
        select = f'SELECT originator_id, originator_version, topic, state FROM "{recorder.datastore.schema or "public"}"."{table}"'
    order = " ORDER BY originator_id, originator_version"
    if originator_ids is None:
        queries: list[tuple[str, list[Any]]] = [(select + order, [])]
    else:
        ids = list(dict.fromkeys(originator_ids))
        queries = []
        for start in range(0, len(ids), _CHUNK):
            chunk = ids[start:start + _CHUNK]
            if sqlite:
                queries.append((f"{select} WHERE originator_id IN ({','.join('?' * len(chunk))}){order}", [i.hex for i in chunk]))
            else:
                queries.append((f"{select} WHERE originator_id = ANY(%s){order}", [chunk]))
    rows: list[Any] = []
    with recorder.datastore.transaction(commit=False) as cursor:
        for sql, params in queries:
            cursor.execute(sql, params)
            rows += cursor.fetchall()
    for row in rows:
        values = tuple(row) if store.backend == "sqlite" else tuple(row.values())
        yield StoredEvent(originator_id=UUID(str(values[0])), originator_version=int(values[1]), topic=values[2],
                          state=bytes(values[3]))


def check_snapshots(store: Any, originator_ids: Sequence[UUID] | None = None,
                    progress: Callable[[int, int], None] | None = None) -> tuple[int, SnapshotProblem | None]:
    """How many snapshots match their events, and the first one that does not: of the whole store, or of
    `originator_ids` only (a session tree's, whose snapshots `history` trusts as much as the whole log's).
    `progress(done, total)` after each snapshot."""
    checked = 0
    transcoder = store.mapper.transcoder
    stored_all = list(stored_snapshots(store, originator_ids))  # read at once by stored_snapshots anyway
    for done, stored in enumerate(stored_all):
        if progress is not None:
            progress(done, len(stored_all))
        try:
            snapshot = store.mapper.to_domain_event(stored)
        except Exception as exc:  # noqa: BLE001 - a damaged snapshot is a finding, not a crash
            if getattr(exc, "forgotten", False):
                continue
            return checked, _problem(stored, f"it does not decode ({type(exc).__name__})")
        aggregate = None
        try:
            for event in store.events.get(stored.originator_id, lte=stored.originator_version):
                aggregate = event.mutate(aggregate)
        except Exception:  # noqa: BLE001 - events that do not decode are `doctor`'s finding, not the snapshot's
            continue
        if aggregate is None or aggregate.version != stored.originator_version:
            return checked, _problem(stored, "no events reach its version: it was slipped in, or its events were deleted")
        # Both through the aggregate class, so an older snapshot is upcast as loading would upcast it.
        expected, found = (transcoder.decode(transcoder.encode(Snapshot.take(a).state)) for a in (aggregate, snapshot.mutate(None)))
        older = snapshot.state.get("class_version", 1) != getattr(type(aggregate), "class_version", 1)
        if not (agrees(found, expected) if older else found == expected):
            return checked, _problem(stored, "it differs from what its events say: it was edited")
        checked += 1
    if progress is not None:
        progress(len(stored_all), len(stored_all))
    return checked, None


def agrees(found: Any, expected: Any) -> bool:
    """A snapshot of an earlier schema, upcast, against the events: what its upcasters could not know
    (a field they fill with None, a key the old shape lacked) is not held against it; all else must match."""
    if found is None:
        return True
    if isinstance(found, dict) and isinstance(expected, dict):
        return all(k in expected and agrees(v, expected[k]) for k, v in found.items())
    if isinstance(found, list) and isinstance(expected, list):
        return len(found) == len(expected) and all(agrees(a, b) for a, b in zip(found, expected, strict=True))
    return bool(found == expected)


def _problem(stored: StoredEvent, detail: str) -> SnapshotProblem:
    return SnapshotProblem(UUID(str(stored.originator_id)), stored.originator_version, stored.topic, detail)
