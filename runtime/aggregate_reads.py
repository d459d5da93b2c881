"""How ChronicleStore reads aggregates: one as it is now or as of a version, and every indexed session.

A mixin, as `SessionTreeReads` and `SnapshotKeeping` are: the store (runtime/store.py) writes and
indexes; these read. Each read of one aggregate comes back as a copy the caller may change (or the
cached object itself with `copy=False`), an erased tree as `ForgottenSession`, a row that does not
decode as `UnreadableEvent` naming it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Iterator
from uuid import UUID

from eventsourcing.application import AggregateNotFoundError, LRUCache

from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn

from .aggregate_batch import CHUNK, load_many
from .aggregate_copy import copy_aggregate
from .store_errors import ForgottenSession, NotFound, UnreadableEvent, unreadable_event
from .store_snapshots import replay


class AggregateReads:
    """What ChronicleStore reads of one aggregate, and of every session (it inherits these)."""

    if TYPE_CHECKING:
        repository: Any
        mapper: Any
        events: Any
        recorder: Any
        snapshotting_intervals: ClassVar[dict[type, int]]
        _first_heads: LRUCache[UUID, tuple[UUID, ...]]

        def session_ids(self) -> list[UUID]: ...

    def session(self, session_id: UUID, version: int | None = None, copy: bool = True) -> Session:
        """`copy=False` hands out the cached aggregate itself, for readers that never change it:
        the deep copy of a long session (every turn id, input and spec) costs ms per get."""
        return self._get(session_id, Session, version, copy)

    def turn(self, turn_id: UUID, version: int | None = None) -> Turn:
        return self._get(turn_id, Turn, version)

    def tool_call(self, call_id: UUID) -> ToolCall:
        return self._get(call_id, ToolCall)

    def find_tool_call(self, call_id: UUID) -> ToolCall | None:
        try:
            return self.tool_call(call_id)
        except NotFound:
            return None

    def _get(self, aggregate_id: UUID, cls: type, version: int | None = None, copy: bool = True) -> Any:
        try:
            # The cached aggregate itself, then our copy of it: eventsourcing's is `copy.deepcopy`,
            # which rebuilt every UUID of a long session (runtime/aggregate_copy.py). A version
            # read is reconstructed fresh, never cached, so it needs no copy.
            aggregate: Any = (
                self._early(aggregate_id, version) if version is not None and version < self._first_snapshot
                else self.repository.get(aggregate_id, version=version, deepcopy_from_cache=False, projector_func=replay)
            )
            if (check := getattr(self.mapper, "check_aggregate", None)) is not None:
                check(aggregate_id)  # a cached aggregate of a tree forgotten elsewhere is not handed out
            if copy and version is None and self.repository.cache is not None:
                aggregate = copy_aggregate(aggregate)
        except AggregateNotFoundError:
            raise NotFound(f"no {cls.__name__.lower()} with id {aggregate_id}") from None
        except Exception as exc:  # noqa: BLE001 - find the row that does not decode, and name it
            from .shred_marks import forgotten_cause

            if (erased := forgotten_cause(exc)) is not None:
                named = "" if aggregate_id == erased.tree else f"{cls.__name__.lower()} {aggregate_id}: "
                raise ForgottenSession(f"{named}{erased}") from None
            raise self._unreadable(aggregate_id, cls, exc) from exc
        if not isinstance(aggregate, cls):
            raise NotFound(f"{aggregate_id} is a {type(aggregate).__name__}, not a {cls.__name__}")
        return aggregate

    def first_head(self, session_id: UUID) -> tuple[UUID, ...]:
        """The turns the session started with: a fork's inherited ones (its first version's head),
        none for any other session. A first version never changes, so it is read once per store
        (or not at all for a session this store created): the loop numbers every turn of a fork
        by it, which was a query per turn."""
        try:
            return self._first_heads.get(session_id)
        except KeyError:
            head = tuple(self.session(session_id, version=1).head)
            self._first_heads.put(session_id, head)
            return head

    @property
    def _first_snapshot(self) -> int:
        """The lowest version any snapshot can be of (runtime/snapshot_schedule.py: none before an interval's
        worth of events): a state read of an earlier version has none to look for."""
        return min(self.snapshotting_intervals.values(), default=1 << 62)

    def _early(self, aggregate_id: UUID, version: int) -> Any:
        """An aggregate as its first `version` events made it, from those events alone, without the repository's
        look for a snapshot first, which no version this early has: one query instead of two (a fork's cut and
        inherited turns, `history --version`, a short session's past). A snapshot is a cache, so were an older
        one there, the events would still give the same state."""
        aggregate = replay(None, self.events.get(aggregate_id, lte=version))
        if aggregate is None:
            raise AggregateNotFoundError(aggregate_id)
        return aggregate

    def _unreadable(self, aggregate_id: UUID, cls: type, exc: Exception) -> Exception:
        for stored in self.recorder.select_events(aggregate_id):
            try:
                self.mapper.to_domain_event(stored)
            except Exception as bad:  # noqa: BLE001
                return unreadable_event(cls.__name__, aggregate_id, stored.originator_version, stored.topic, bad)
        return exc  # every event decodes: the failure is elsewhere, keep it as it was

    def sessions(self, on_error: Any = None) -> Iterator[Session]:
        """The indexed sessions that load; one that does not is skipped, not fatal.

        Stores written before creation was made atomic can hold index entries naming no
        session, and a damaged row can make one session unreadable (see `doctor`): neither may
        make every listing, worker poll and `resume --all` fail. `on_error(session_id, error)`
        hears of each session skipped.

        Read in batches (runtime/aggregate_batch.py): two queries per few hundred sessions, not two
        each, for the scans of every session (`resume --all`, self-repair, the reply outbox). A
        session this store has cached is brought up to date from it instead, as `session` would."""
        cached = self.repository.cache.cache if self.repository.cache is not None else {}
        skipped: dict[UUID, Exception] = {}

        def alone(sid: UUID) -> Session | None:
            try:
                return self.session(sid)
            except (NotFound, UnreadableEvent) as exc:
                skipped[sid] = exc
                return None

        ids = self.session_ids()
        for start in range(0, len(ids), CHUNK):
            chunk = ids[start:start + CHUNK]
            cold = [sid for sid in chunk if sid not in cached]
            loaded = load_many(self, cold, Session, alone) if len(cold) > 1 else {}
            for sid in chunk:
                session = loaded[sid] if sid in loaded else alone(sid)
                if session is not None:
                    yield session
                elif on_error is not None:
                    on_error(sid, skipped.pop(sid))
