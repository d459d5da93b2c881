"""The snapshots the store takes, prunes and deletes, and `replay`, the projector they and every read use.

Snapshots are caches: the events hold every state, so a snapshot may be pruned (a Turn keeps
only its newest) or deleted (`doctor --repair` of one that does not decode) without losing anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterable, Literal
from uuid import UUID

from eventsourcing.application import Application

from chronicle.domain.turn import Turn

from .snapshot_schedule import ended_turns, snapshot_due
from .store_errors import version_gap


def replay(aggregate: Any, events: Iterable[Any]) -> Any:
    """eventsourcing's `project_aggregate` without its `assert isinstance(event, CanMutateProtocol)`
    per event: a runtime-checkable Protocol check costs ≈ 20 µs, more than decoding the event,
    and every event we store is an eventsourcing event (it was decoded from its topic).

    A hole in the versions (a row deleted by hand) is MissingEvents naming the aggregate and the
    versions gone, not eventsourcing's bare `OriginatorVersionError: (4, 3)`. Every reader that
    applies events itself goes through here (or `apply_event`) for that."""
    event = None
    try:
        for event in events:
            aggregate = event.mutate(aggregate)
    except Exception as exc:
        gap = version_gap(aggregate, event) if event is not None else None
        if gap is None:
            raise
        raise gap from exc
    return aggregate


def apply_event(aggregate: Any, event: Any) -> Any:
    """One event applied, a hole before it said as `replay` says it."""
    return replay(aggregate, (event,))


class SnapshotKeeping(Application[UUID]):
    """The store's snapshot handling (ChronicleStore inherits it): when one is due and how it is taken."""

    if TYPE_CHECKING:
        @property
        def backend(self) -> str: ...  # "sqlite" or "postgresql": ChronicleStore's

    def _take_snapshots(self, processing: Any) -> None:
        """eventsourcing's, except that a snapshot due at the version an aggregate in hand has just
        reached is taken from that aggregate. eventsourcing reads it back first (the previous
        snapshot and every event since, decoded and replayed: ≈ 47 ms for a turn's 100th event on
        PostgreSQL, a seventh of a 50-step turn); the aggregate is that state already, since all it
        holds comes from its events. `verify` re-derives every snapshot from the events."""
        if not self.snapshots or not self.snapshotting_intervals:
            return
        ended = ended_turns(processing.events)
        for event in processing.events:
            aggregate = processing.aggregates.get(event.originator_id)
            interval = self.snapshotting_intervals.get(type(aggregate)) if aggregate is not None else None
            if interval is None or not snapshot_due(aggregate, event.originator_version, interval, ended):
                continue
            if event.originator_version == aggregate.version:
                self._put_snapshot(aggregate)
            else:  # due at an event in the middle of this save: that state is read back
                self.take_snapshot(event.originator_id, version=event.originator_version)

    def take_snapshot(self, aggregate_id: UUID, version: int | None = None, projector_func: Any = None) -> None:
        """Snapshot as eventsourcing does; for a Turn, then delete its older snapshots.

        A Turn snapshot holds the whole turn, so keeping one per 100 events made a long turn's
        snapshots grow quadratically (a 1,000-step turn: 9.6 MB of snapshots for 1 MB of
        events). Only the newest one speeds up loading it; the events keep every older state
        (time travel rebuilds turns from events, not from their snapshots). Session snapshots
        stay: `session(id, version=N)` uses them, and a session's state is small.
        """
        self._put_snapshot(self.repository.get(aggregate_id, version=version, projector_func=projector_func or replay))

    def _put_snapshot(self, aggregate: Any) -> None:
        assert self.snapshots is not None
        aggregate_id = aggregate.id
        snapshot_class = getattr(type(aggregate), "Snapshot", None) or type(self).snapshot_class
        assert snapshot_class is not None
        snapshot = snapshot_class.take(aggregate)
        self.snapshots.put([snapshot])
        if isinstance(aggregate, Turn):
            self._prune_snapshots(aggregate_id, snapshot.originator_version)

    def _prune_snapshots(self, aggregate_id: UUID, keep_version: int) -> None:
        self._delete_snapshots(aggregate_id, "<", keep_version)

    def delete_snapshot(self, aggregate_id: UUID, version: int) -> None:
        """`doctor --repair` of a snapshot that does not decode: a cache, so deleting it loses
        nothing (the aggregate is loaded from its events, and snapshotted again when one is due)."""
        self._delete_snapshots(aggregate_id, "=", version)

    def _delete_snapshots(self, aggregate_id: UUID, compare: Literal["<", "="], version: int) -> None:
        recorder: Any = self.snapshots.recorder  # type: ignore[union-attr]
        table = recorder.events_table_name
        if self.backend == "sqlite":
            with recorder.datastore.transaction(commit=True) as cursor:
                cursor.execute(
                    f"DELETE FROM {table} WHERE originator_id = ? AND originator_version {compare} ?", (aggregate_id.hex, version)
                )
            return
        from psycopg import sql as pgsql

        statement = pgsql.SQL("DELETE FROM {}.{} WHERE originator_id = %s AND originator_version " + compare + " %s").format(
            pgsql.Identifier(recorder.datastore.schema or "public"), pgsql.Identifier(table)
        )
        with recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(statement, (aggregate_id, version))
