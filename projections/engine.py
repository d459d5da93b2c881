"""Keeps projections current: read the log after each one's position, apply, track, commit.

eventsourcing's ProjectionRunner needs a recorder that supports subscriptions, which SQLite's
does not; this engine polls `select_notifications` instead, on both backends, and applies
events in batches: one transaction per batch holds the rows and the new position, so a
crash loses nothing and repeats nothing. Catch-up is cheap when nothing is new (one query per
projection), so read commands call it before answering and are never stale.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from eventsourcing.persistence import IntegrityError

from .base import KEY_PREFIX, Projection
from .sql import Database, retry_creation

Progress = Callable[[str, int, int], None]  # (projection name, position, head)
#: Events per transaction when rebuilding (a catch-up takes `batch_size`, 500 by default).
REBUILD_BATCH = 2000
#: A projection set up (new, or of a new version) over a log at least this long is announced: the
#: command that set it up builds it from the whole log first, seconds of silence otherwise.
ANNOUNCE_FROM = 20_000

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Status:
    name: str
    position: int
    lag: int
    head: int


class UnknownProjection(LookupError):
    pass


class ProjectionStuck(RuntimeError):
    """A projection whose next batch conflicts with the rows already in its tables, every time it is
    tried: retrying cannot help (the same events meet the same rows), only a rebuild can."""

    def __init__(self, name: str, position: int, cause: BaseException) -> None:
        self.name = name
        self.position = position
        self.cause = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
        super().__init__(self.said(f"chronicle projections rebuild {name}"))

    def said(self, rebuild: str) -> str:
        """The message, with `rebuild` as the command to paste (the CLI names its store in it)."""
        return (f"the {self.name} read model cannot catch up: the events after log position {self.position} conflict with "
                f"rows already in its tables ({self.cause}); `{rebuild}` rebuilds it from the log")


def tracking_database(factory: Any, events_table: str, keys: Sequence[str] = (),
                      prefix: str | None = None) -> tuple[Database, dict[str, int | None] | None]:
    """The store's database through its tracking recorder, whose table is set up only when it
    needs to be, and the positions of `keys` (and of every other key that starts with `prefix`)
    when they were read on the way (None when not).

    eventsourcing's factory runs `create_table` on every construction: on PostgreSQL a DDL
    transaction whose commit waits for a WAL flush (≈ 4 ms), on SQLite two transactions (the
    marker's read, then `CREATE TABLE IF NOT EXISTS` and a commit), paid by every command that
    reads a projection. The migration marker row says the table exists as eventsourcing 9.5
    wants it (a missing table or marker still goes through `create_table`, which makes or
    migrates it); it is read in the statement that reads the projections' positions, which
    `ensure` needs next."""
    postgres = "postgres" in type(factory).__module__
    if factory.env.get(factory.TRACKING_RECORDER_TOPIC) or not (postgres or factory.datastore.single_row_tracking):
        return Database(retry_creation(factory.tracking_recorder), events_table), None
    from eventsourcing.persistence import OperationalError, ProgrammingError

    cls = type(factory).tracking_recorder_class
    recorder = (
        cls(datastore=factory.datastore, tracking_table_name=(factory.env.name.lower() or "notification") + "_tracking")
        if postgres else cls(datastore=factory.datastore)
    )
    db = Database(recorder, events_table)
    if not factory.env_create_table():
        return db, None
    marker_key = recorder.table_migration_identifier

    def found() -> dict[str, int | None]:
        """The marker's and the keys' positions; none when there is no table yet."""
        try:
            # SQLite's "no such table" is an OperationalError, which `positions` would wait out as
            # a blip (2 s); a locked file is a lost creation race, tried again below.
            return db.positions([marker_key, *keys], patient=postgres, prefix=prefix)
        except ProgrammingError:  # PostgreSQL: no table yet
            return {}
        except OperationalError as exc:
            if postgres or "no such table" not in str(exc):
                raise
            return {}

    def set_up() -> dict[str, int | None] | None:
        positions = found()
        marker = positions.get(marker_key)
        if not marker:
            recorder.create_table()
            return None
        recorder.tracking_table_exists = True
        recorder.tracking_migration_current = recorder.tracking_migration_previous = marker
        return {key: position for key, position in positions.items() if key != marker_key}

    # Lost to another process creating it (`lost_creation_race`: on SQLite the marker written
    # first, or the file locked while the winner sets it up): the next try finds the marker.
    return db, retry_creation(set_up)


def other_versions(positions: dict[str, int | None], projection: Projection) -> list[str]:
    """The tracking keys in `positions` of `projection`'s other versions."""
    return sorted(key for key in positions if key.startswith(projection.versions) and key != projection.key)


class ProjectionEngine:
    def __init__(self, app: Any, projections: Iterable[Projection], batch_size: int = 500, ensure: bool = True,
                 announce: bool = True) -> None:
        """`app` is the store's eventsourcing Application: its recorder, mapper and factory.
        `ensure=False` for a read-only store: its tables are read as they stand, never created.
        `announce=False` where no catch-up follows the set-up (`projections status` only reports; `rebuild`
        says what it builds): no warning that a read model is being built from the log."""
        self.announce = announce
        self.app = app
        self.recorder = app.recorder
        self.mapper = app.mapper
        self.projections = {p.name: p for p in projections}
        self.db, positions = tracking_database(app.factory, app.recorder.events_table_name, [p.key for p in self.projections.values()],
                                               prefix=KEY_PREFIX)
        self.batch_size = batch_size
        #: Whether the rows' commits may skip waiting for the disk (the store's durability setting:
        #: the read models are derived from the log, and a catch-up applies again what a power cut lost).
        self.relaxed = bool(getattr(app, "relaxed_commits", False))
        #: Positions of events that could not be decoded and were passed over, with why.
        self.unreadable: dict[int, str] = {}
        if ensure:
            self.ensure(positions)

    # -- set-up --------------------------------------------------------------------------------

    def select(self, names: Iterable[str] | None = None) -> list[Projection]:
        if names is None:
            return list(self.projections.values())
        chosen = []
        for name in names:
            if name not in self.projections:
                known = ", ".join(self.projections)
                raise UnknownProjection(f"no projection named {name!r}; known: {known}")
            chosen.append(self.projections[name])
        return chosen

    def ensure(self, positions: dict[str, int | None] | None = None) -> None:
        """A projection never tracked (or of a new version) gets its tables and starts from zero.

        A tracked one already has them: its tables and its tracking row are created in one
        transaction, under a key that names the projection's version. So a command that opens
        the store (every CLI command does) issues no DDL: on PostgreSQL each `CREATE … IF NOT
        EXISTS` was a statement and the set of them a transaction of its own. `positions`, when
        the caller has just read them (with every other version's), saves reading them again.

        All versions of a projection share its table names, so the tables are the last set-up's:
        a set-up deletes the other versions' tracking rows, which no longer describe them. A row
        of another version found beside this one's means the tables may be that version's (an
        upgrade, then a rollback: this version's row was left at its old position, over the newer
        version's rows, and its next batch met rows already there, every time): the projection
        is built again from the log, as for a new version."""
        known = positions if positions is not None else self.db.positions([p.key for p in self.projections.values()], prefix=KEY_PREFIX)
        built = []
        for projection in self.projections.values():
            if known[projection.key] is not None and not other_versions(known, projection):
                continue
            for attempt in range(3):
                try:
                    with self.db.transaction() as tx:
                        # Its tracking row locked first: a write before any read makes SQLite wait
                        # for another process's set-up instead of failing, then see it done.
                        fresh = self.db.lock_position(tx, projection.key) is None
                        others = [key for key in self.db.keys_with_prefix(tx, projection.versions) if key != projection.key]
                        if fresh or others:
                            if others and not fresh:
                                log.info("the %s read model's tables may be another version's (%s tracked beside v%d): "
                                         "building them again from the log", projection.name, ", ".join(others), projection.version)
                            fresh = True
                            projection.drop(tx)
                            projection.create(tx)
                            self.db.reset(tx, projection.key)
                            for key in others:
                                self.db.forget(tx, key)
                    if fresh:
                        built.append(projection)
                    break
                except Exception:  # noqa: BLE001 - another process set it up at the same moment
                    if attempt == 2:
                        raise
        if built:
            self._announce(built)

    def _announce(self, built: list[Projection]) -> None:
        """Say why the command is about to take a while: the first command to read a read model
        that is new to the store (or changed by an upgrade) builds it from the whole log."""
        if not self.announce:
            return
        head = self.head()
        if head < ANNOUNCE_FROM:
            return
        for projection in built:
            log.warning("building the %s read model (v%d) from the log's %s events; this happens once "
                        "(`chronicle projections rebuild %s` shows progress)", projection.name, projection.version,
                        f"{head:,}", projection.name)

    # -- reading the positions -----------------------------------------------------------------

    def head(self) -> int:
        return self.recorder.max_notification_id() or 0

    def position(self, name: str) -> int:
        return self.db.position(self.projections[name].key) or 0

    def status(self) -> list[Status]:
        head = self.head()
        result = []
        for projection in self.projections.values():
            position = self.position(projection.name)
            lag = self.db.count_after(position) if position < head else 0
            result.append(Status(projection.name, position, lag, head))
        return result

    # -- applying events -----------------------------------------------------------------------

    def catch_up(self, names: Iterable[str] | None = None, progress: Progress | None = None, batch_size: int | None = None) -> int:
        """Apply every event after each projection's position; return how many were applied.

        Projections at the same position share each batch: it is read and decoded once, and
        applied to all of them in one transaction that also moves each one's position (a
        rebuild, where all start at 0, reads the log once). Projections at different positions
        catch up lowest first until they meet, so one behind never holds the others back.
        """
        chosen = self.select(names)
        found = self.db.positions([p.key for p in chosen])
        positions = {p.name: found[p.key] or 0 for p in chosen}
        done: set[str] = set()
        head = self.head() if progress is not None else 0  # only a progress bar needs the end
        applied = 0
        conflicts: set[tuple[str, int]] = set()  # (projection, position) whose batch met rows already there
        solo: set[str] = set()  # refused in a shared batch: each applied alone, so that a refusal names its projection
        while len(done) < len(chosen):
            low = min(positions[p.name] for p in chosen if p.name not in done)
            group = [p for p in chosen if p.name not in done and positions[p.name] == low]
            if any(p.name in solo for p in group):
                group = group[:1]
            notifications = self.recorder.select_notifications(start=low, limit=batch_size or self.batch_size, inclusive_of_start=False)
            if not notifications:
                done.update(p.name for p in group)
                continue
            events = self._decode(notifications)
            passed = [n for n in notifications if n.id in self.unreadable]
            try:
                with self.db.transaction(pipelined=True, relaxed=self.relaxed) as tx:
                    for projection in sorted(group, key=lambda p: p.key):  # one lock order: no deadlock
                        current = self.db.lock_position(tx, projection.key) or 0
                        if current != low:
                            raise _Moved(current, projection.name)
                        self.db.advance(tx, projection.key, notifications[-1].id)
                    for projection in group:
                        for event, position in events:
                            projection.process(tx, event, position)
                        for notification in passed:
                            projection.passed_over(tx, notification.id, notification.originator_id)
            except _Moved as moved:
                positions[moved.name] = moved.position  # another process applied this batch; continue after it
                continue
            except IntegrityError as exc:
                # Another process may have moved a position meanwhile: go on from where it is. The same
                # batch refused twice at the same position is no race: its rows are already there
                # (tables left by another version, or changed by hand), and retrying would spin forever.
                for projection in group:
                    position = self.position(projection.name)
                    if position == low:
                        if len(group) == 1 and (projection.name, low) in conflicts:
                            raise ProjectionStuck(projection.name, low, exc) from exc
                        conflicts.add((projection.name, low))
                    positions[projection.name] = position
                if len(group) > 1:
                    solo.update(p.name for p in group)
                continue
            end_position = notifications[-1].id
            for projection in group:
                applied += len(notifications)
                positions[projection.name] = end_position
                if progress is not None:
                    progress(projection.name, end_position, max(head, end_position))
        return applied

    def _decode(self, notifications: list[Any]) -> list[tuple[Any, int]]:
        """Decode each event on its own: one damaged row is passed over and reported (in
        `unreadable`), never a wall that stops every projection and every listing behind it.
        Once the row is repaired, `projections rebuild` brings its facts in."""
        events = []
        for notification in notifications:
            try:
                events.append((self.mapper.to_domain_event(notification), notification.id))
            except Exception as exc:  # noqa: BLE001 - what cannot be decoded is reported, not fatal
                if getattr(exc, "forgotten", False):  # erased on purpose (`chronicle forget`): nothing to report
                    continue
                first = str(exc).splitlines()[0] if str(exc) else ""
                self.unreadable[notification.id] = f"{notification.topic}: {type(exc).__name__}: {first}"
        return events

    def rebuild(self, names: Iterable[str] | None = None, progress: Progress | None = None) -> int:
        """Drop the projections' tables and replay the whole log into them."""
        chosen = self.reset(names, progress)
        return self.replay([p.name for p in chosen], progress)

    def reset(self, names: Iterable[str] | None = None, progress: Progress | None = None) -> list[Projection]:
        """A rebuild's first half: each projection's tables dropped and made again, at position 0."""
        chosen = self.select(names)
        for projection in chosen:
            with self.db.transaction() as tx:
                self.db.lock_position(tx, projection.key)
                projection.drop(tx)
                projection.create(tx)
                self.db.reset(tx, projection.key)
            if progress is not None:
                progress(projection.name, 0, self.head())
        return chosen

    def replay(self, names: Iterable[str] | None = None, progress: Progress | None = None) -> int:
        """A rebuild's second half: `catch_up` in larger batches. A rebuild is one operator's long
        job, so fewer, longer transactions (a commit each) cost no one."""
        return self.catch_up(names, progress, batch_size=max(self.batch_size, REBUILD_BATCH))

    # -- inspection ----------------------------------------------------------------------------

    def dump(self, name: str) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of the projection's tables, sorted: what 'identical tables' compares."""
        return dump_tables(self.db, self.projections[name])

    def read(self) -> Any:
        """A read-only transaction for queries over the projection tables."""
        return self.db.transaction(commit=False)


def dump_tables(db: Database, projection: Projection) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of `projection`'s tables in `db`, sorted, read in one transaction."""
    with db.transaction(commit=False) as tx:
        return {table: sorted(tx.rows(f"SELECT * FROM {table}"), key=repr) for table in projection.tables}


class _Moved(Exception):
    def __init__(self, position: int, name: str) -> None:
        self.position = position
        self.name = name
