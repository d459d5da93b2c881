"""`chronicle projections check`: the read models compared with what the log gives, row for row.

The hash chain proves the log; `audit`, `history --at`, `sessions` and `cost` read the read
models, which anyone who can write to the database can edit without touching the log (an
approver's name in `proj_audit`, an answer in `proj_history_turns`), and `verify` never looks
at them. This check builds each read model again from the log, in a scratch SQLite database
of its own (the live tables are neither locked nor written, so a running agent or server goes
on), up to the position the live one has reached, and compares the two sets of rows.

The tables' SQL is portable (projections/base.py), so a PostgreSQL store's read models are
built in SQLite here and compared value for value; the same events in the same order give the
same rows whichever backend applies them (the suite holds rebuild == incremental on both).
"""

from __future__ import annotations

import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from chronicle.projections import Projection, ProjectionEngine
from chronicle.projections.engine import REBUILD_BATCH, dump_tables
from chronicle.projections.sql import Database

from .read_models import all_projections, caught_up, price
from .store import ChronicleStore

#: Times the live read models are dumped again when a catch-up moved one of them during its dump.
STEADY_TRIES = 5
#: Rows of a differing table shown as examples.
EXAMPLES = 3


class ReadModelsBusy(RuntimeError):
    """The live read models kept moving while they were read: the store is too busy to compare now."""


@dataclass
class TableDifference:
    table: str
    #: Rows the log gives that the live table does not hold (or holds otherwise).
    missing: list[tuple[Any, ...]] = field(default_factory=list)
    #: Rows the live table holds that the log does not give.
    unexpected: list[tuple[Any, ...]] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        return {"table": self.table, "missing": len(self.missing), "unexpected": len(self.unexpected),
                "examples_missing": [list(r) for r in self.missing[:EXAMPLES]],
                "examples_unexpected": [list(r) for r in self.unexpected[:EXAMPLES]]}


@dataclass
class Checked:
    """One read model compared at `position` (the last log position it had applied)."""

    name: str
    position: int
    differences: list[TableDifference]

    @property
    def agrees(self) -> bool:
        return not self.differences

    def row(self) -> dict[str, Any]:
        return {"projection": self.name, "position": self.position, "agrees": self.agrees,
                "tables": [d.row() for d in self.differences]}


def check(store: ChronicleStore, names: Iterable[str] | None = None,
          progress: Callable[[str, int, int], None] | None = None) -> list[Checked]:
    """Each chosen read model (all without `names`) against the log, in the order the engine lists them."""
    live = caught_up(store)
    chosen = live.select(names)
    positions, dumps = _steady_dumps(live, [p.name for p in chosen])
    with tempfile.TemporaryDirectory(prefix="chronicle-check-") as scratch_dir:
        scratch = _Scratch.at(Path(scratch_dir) / "read-models.db", [p.name for p in chosen])
        _replay(live, scratch, positions, progress)
        return [Checked(name, positions[name], _compare(dumps[name], _normalised(scratch.dump(name))))
                for name in positions]


def _steady_dumps(live: ProjectionEngine, names: list[str]) -> tuple[dict[str, int], dict[str, dict[str, list[tuple[Any, ...]]]]]:
    """Every chosen read model's rows with the position they stand at: a position read before and after the rows,
    unchanged, says no catch-up committed in between (rows and position move in one transaction)."""
    for _ in range(STEADY_TRIES):
        before = {name: live.position(name) for name in names}
        dumps = {name: _normalised(live.dump(name)) for name in names}
        if {name: live.position(name) for name in names} == before:
            return before, dumps
    raise ReadModelsBusy("the read models kept moving while they were read (agents or workers are writing); "
                         "run the check again when the store is quieter")


@dataclass
class _Scratch:
    """The chosen read models' tables, empty at first, in a SQLite file of their own: built, compared, thrown away."""

    db: Database
    projections: dict[str, Projection]

    @classmethod
    def at(cls, path: Path, names: list[str]) -> "_Scratch":
        from eventsourcing.sqlite import SQLiteDatastore, SQLiteTrackingRecorder

        recorder = SQLiteTrackingRecorder(SQLiteDatastore(str(path)))
        recorder.create_table()
        scratch = cls(Database(recorder, "stored_events"), {p.name: p for p in all_projections(pricer=price) if p.name in names})
        with scratch.db.transaction() as tx:
            for projection in scratch.projections.values():
                projection.create(tx)
        return scratch

    def dump(self, name: str) -> dict[str, list[tuple[Any, ...]]]:
        return dump_tables(self.db, self.projections[name])


def _replay(live: ProjectionEngine, scratch: _Scratch, positions: dict[str, int],
            progress: Callable[[str, int, int], None] | None) -> None:
    """The log up to each read model's position, decoded once, applied to the scratch tables of those at or past it."""
    end = max(positions.values(), default=0)
    at = 0
    while at < end:
        notifications = [n for n in live.recorder.select_notifications(start=at, limit=REBUILD_BATCH, inclusive_of_start=False)
                         if n.id <= end]
        if not notifications:
            break
        events = live._decode(notifications)
        with scratch.db.transaction() as tx:
            for name, projection in scratch.projections.items():
                for event, position in events:
                    if position <= positions[name]:
                        projection.process(tx, event, position)
                for notification in notifications:
                    if notification.id in live.unreadable and notification.id <= positions[name]:
                        projection.passed_over(tx, notification.id, notification.originator_id)
        at = notifications[-1].id
        if progress is not None:
            for name in scratch.projections:
                progress(name, min(at, positions[name]), positions[name])


def _normalised(dump: dict[str, list[tuple[Any, ...]]]) -> dict[str, list[tuple[Any, ...]]]:
    """Values as both backends give them back alike: PostgreSQL's booleans and SQLite's 0/1, memoryviews as bytes."""

    def value(v: Any) -> Any:
        if isinstance(v, bool):
            return int(v)
        if isinstance(v, memoryview):
            return bytes(v)
        return v

    return {table: [tuple(value(v) for v in row) for row in rows] for table, rows in dump.items()}


def _compare(live: dict[str, list[tuple[Any, ...]]], built: dict[str, list[tuple[Any, ...]]]) -> list[TableDifference]:
    differences = []
    for table in built:
        have, want = Counter(live.get(table, [])), Counter(built[table])
        if have == want:
            continue
        differences.append(TableDifference(table, sorted((want - have).elements(), key=repr),
                                           sorted((have - want).elements(), key=repr)))
    return differences
