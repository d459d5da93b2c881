"""A real store that counts what it loads: a test of a bound says how many aggregates a read took.

The store is ChronicleStore itself on the test's database; only its repository is a subclass that
tallies each aggregate `get` hands out, by class name (`store.loads["RoutineRun"]`), and keeps their
ids (`store.loaded`); and its recorder counts the stored events it selects, by aggregate id
(`store.rows_read[session_id]`), whoever asked: a repository get or a read of the events themselves."""

from __future__ import annotations

from collections import Counter
from typing import Any

from eventsourcing.application import Repository

from chronicle.runtime.store import ChronicleStore
from tests.closed_at_end import closed_at_end


class CountingRepository(Repository):  # type: ignore[type-arg]
    loads: Counter[str]
    ids: set[Any]

    def get(self, aggregate_id: Any, *args: Any, **kwargs: Any) -> Any:
        aggregate = super().get(aggregate_id, *args, **kwargs)
        self.loads[type(aggregate).__name__] += 1
        self.ids.add(aggregate_id)
        return aggregate


class CountingStore(ChronicleStore):
    """Closed when the test that opened it ends (tests/closed_at_end.py): a test opens one per "restart" it plays."""

    name = ChronicleStore.name  # eventsourcing names an application's tables after its class otherwise

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        closed_at_end(self)

    def construct_recorder(self) -> Any:
        recorder = super().construct_recorder()
        rows_read: Counter[Any] = Counter()
        select = recorder.select_events

        def counted(originator_id: Any, *args: Any, **kwargs: Any) -> Any:
            rows = select(originator_id, *args, **kwargs)
            rows_read[originator_id] += len(rows)
            return rows

        recorder.select_events = counted
        recorder.rows_read = rows_read
        return recorder

    @property
    def rows_read(self) -> Counter[Any]:
        return self.recorder.rows_read  # type: ignore[no-any-return]

    def construct_repository(self) -> Any:
        repository = super().construct_repository()
        repository.__class__ = CountingRepository  # the same repository, built as eventsourcing builds it
        repository.loads = Counter()
        repository.ids = set()
        return repository

    @property
    def loads(self) -> Counter[str]:
        return self.repository.loads  # type: ignore[attr-defined, no-any-return]

    @property
    def loaded(self) -> set[Any]:
        return self.repository.ids  # type: ignore[attr-defined, no-any-return]
