"""Checks a store for damage that no command should trip over, and repairs what can be repaired.

What it looks for, in one pass over the log:
- index entries naming a session that has no events (left by creators that raced before
  creation was made atomic): repaired by withdrawing the entry, as one more index event;
- sessions with events but no index entry: repaired by indexing them;
- events that cannot be decoded: reported by position, aggregate and topic (they cannot be
  repaired from here: restore the row from a backup, then `projections rebuild`), those a newer
  Chronicle wrote among them (runtime/event_versions.py: a sound row that this release is too old to read);
- events that decode but do not fit the stored vocabulary (runtime/vocabulary.py): a field of the
  wrong type, missing or unknown, as the code of today reads it after upcasting. Written by a
  bug, an edit of the database or a schema change without its upcaster; some reader would
  misread it. Reported the same way; the remedy is an upcaster or restoring the row;
- holes in an aggregate's versions (a row deleted by hand): every read of that aggregate fails
  (runtime/store_errors.MissingEvents); reported at the event after the hole, which cannot be
  repaired from here (restore the rows from a backup; `verify` names the cut in the chain). Each
  aggregate's last version seen is kept while the log is read in order, so this costs a dict entry
  per aggregate and no query. A deleted *last* event leaves no hole: only `verify` sees that;
- snapshots that do not decode: loading passes over them (runtime/snapshot_store.py), so nothing
  fails, but each load replays the aggregate from its first event; repaired by deleting the
  snapshot (a cache: the events rebuild it);
- on SQLite, a damaged file (`PRAGMA quick_check`: pages that do not hold together, after a disk error, a copy
  taken mid-write or an edit of the file): reported with the tables it touches, and nothing else is checked, since
  every read of those tables fails. Not repaired here: a damaged table cannot even be dropped (SQLite walks its
  pages to free them), so `projections rebuild` cannot mend a damaged read model in place either; the file is
  copied out with `sqlite3 FILE .recover` (store_errors.damage_advice) or restored from a backup;
- on PostgreSQL, the stored function every save calls (runtime/chain_postgres.py), missing from a
  store restored from a dump of its tables alone: repaired by creating it again (a save that
  finds it missing does the same).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable, Iterator
from uuid import UUID

from .app.errors import first_line
from .snapshot_check import stored_snapshots
from .snapshot_store import why
from .store import ChronicleStore
from .stored_vocabulary import misfit

SESSION_STARTED = "chronicle.domain.session:Session.Started"
#: v3 of these say whether the files were asked for: a session with one may owe them (files_owed).
FILES_ASKED = {"chronicle.domain.session:Session.TurnsUndone", "chronicle.domain.session:Session.TurnsRedone"}


@dataclass
class Finding:
    # dangling_index_entry | unindexed_session | unreadable_event | misfit_event | missing_event | unreadable_snapshot
    # | missing_save_function | files_owed
    check: str
    detail: str
    session_id: str | None = None
    position: int | None = None
    aggregate_id: str | None = None
    #: The event's or snapshot's version of its aggregate (a snapshot has no position in the log).
    version: int | None = None
    repaired: bool = False
    #: Later events with the same problem (a misfit_event's topic and field), counted here rather
    #: than listed: a schema change without its upcaster misfits every event of its class.
    similar: int = 0

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def scan_log(
    store: ChronicleStore, batch: int = 1000, progress: Callable[[int, int], None] | None = None,
) -> Iterator[tuple[int, Any, Any, Exception | None]]:
    """Every stored event with its position and the event decoded, or None and why it does not decode."""
    head = store.max_position()
    position = 0
    while True:
        rows = store.recorder.select_notifications(start=position, limit=batch, inclusive_of_start=False)
        if not rows:
            return
        for row in rows:
            try:
                event = store.mapper.to_domain_event(row)
            except Exception as exc:  # noqa: BLE001 - reporting what does not decode is the point
                if getattr(exc, "forgotten", False):  # erased on purpose (`chronicle forget`): not damage
                    continue
                yield row.id, row, None, exc
            else:
                yield row.id, row, event, None
        position = rows[-1].id
        if progress is not None:
            progress(position, head)


@dataclass
class Examination:
    findings: list[Finding]
    #: The log's rows read (erased ones aside). Not the head position: PostgreSQL's sequence skips the number of each
    #: insert that rolled back, so `doctor` said 117 events where `verify` chained 115.
    events: int


def examine(store: ChronicleStore, repair: bool = False, progress: Callable[[int, int], None] | None = None) -> list[Finding]:
    return examine_log(store, repair, progress).findings


def examine_log(store: ChronicleStore, repair: bool = False, progress: Callable[[int, int], None] | None = None) -> Examination:
    damage = _file_damage(store)
    if damage is not None:
        return Examination([damage], 0)
    findings: list[Finding] = [*_store_code(store, repair)]
    started: set[UUID] = set()
    misfits: dict[tuple[str, str], Finding] = {}
    asked: set[UUID] = set()
    versions: dict[Any, int] = {}
    events = 0
    for position, row, event, error in scan_log(store, progress=progress):
        events += 1
        if (gap := _version_gap(versions, position, row)) is not None:
            findings.append(gap)
        if row.topic == SESSION_STARTED:
            started.add(UUID(str(row.originator_id)))
        if row.topic in FILES_ASKED and getattr(event, "files", False):
            asked.add(UUID(str(row.originator_id)))
        if error is not None:
            first = str(error).splitlines()[0] if str(error) else ""
            findings.append(Finding(
                "unreadable_event", f"{row.topic} version {row.originator_version} cannot be decoded: {type(error).__name__}: {first}",
                position=position, aggregate_id=str(row.originator_id), version=row.originator_version,
            ))
        elif (found := misfit(row.topic, event)) is not None:
            if (row.topic, found.problem) in misfits:
                misfits[row.topic, found.problem].similar += 1
                continue
            misfits[row.topic, found.problem] = Finding(
                "misfit_event", f"{row.topic} version {row.originator_version} does not fit its declared fields: {found.detail}",
                position=position, aggregate_id=str(row.originator_id), version=row.originator_version,
            )
            findings.append(misfits[row.topic, found.problem])
    findings += _snapshots(store, repair)
    indexed = store.session_ids()
    for sid in indexed:
        if sid not in started:
            finding = Finding("dangling_index_entry", "the session index names a session that has no events (lost at creation)",
                              session_id=str(sid))
            if repair:
                store.unlist_session(sid, "no events: lost at creation by a racing creator")
                finding.repaired = True
            findings.append(finding)
    for sid in sorted(started - set(indexed), key=str):
        finding = Finding("unindexed_session", "a session with events that no listing shows", session_id=str(sid))
        if repair:
            store.index_session(sid)
            finding.repaired = True
        findings.append(finding)
    findings += _files_owed(store, asked, repair)
    return Examination(findings, events)


def _version_gap(versions: dict[Any, int], position: int, row: Any) -> Finding | None:
    """A hole before this row in its aggregate's versions (the log is read in commit order, and an aggregate's
    versions are committed in order), as the readers would meet it (store_errors.missing_events)."""
    held = versions.get(row.originator_id, 0)
    versions[row.originator_id] = max(held, row.originator_version)
    if row.originator_version <= held + 1:
        return None
    first, last = held + 1, row.originator_version - 1
    gone = f"event {first} is" if first == last else f"events {first}-{last} are"
    return Finding("missing_event", f"{gone} missing before {row.topic} version {row.originator_version}: "
                   "a row was deleted, and every read of this aggregate fails on it",
                   position=position, aggregate_id=str(row.originator_id), version=first)


def _files_owed(store: ChronicleStore, asked: set[UUID], repair: bool) -> Iterator[Finding]:
    """An undo/redo --files cut off between its record and its file writes (runtime/files_owed.py)."""
    from .files_owed import OwedHeld, finish_owed
    from .timetravel import TimeTravelError

    for sid in sorted(asked, key=str):
        try:
            owed = store.session(sid).files_owed
        except Exception:  # noqa: BLE001 - an unreadable session is reported by the log scan above
            continue
        if not owed:
            continue
        finding = Finding("files_owed", f"its last {owed['kind']} --files was recorded but its files were not all "
                          f"written (interrupted); the workspace {owed['workspace']} is as before it", session_id=str(sid))
        if repair:
            try:
                done = finish_owed(store, sid)
            except TimeTravelError as exc:
                finding.detail += f"; not finished: {exc}"
            else:
                if isinstance(done, OwedHeld):
                    finding.detail += f"; not finished: {done.holder} holds the session (it finishes them, or resume does later)"
                    yield finding
                    continue
                finding.repaired = True
                if done is not None and done.refused:
                    finding.detail += f"; refused (changed since, left as they are): {', '.join(done.refused)}"
        yield finding


def _snapshots(store: ChronicleStore, repair: bool) -> Iterator[Finding]:
    from .shred_marks import forgotten_cause

    for stored in stored_snapshots(store):
        try:
            store.mapper.to_domain_event(stored)
        except Exception as exc:  # noqa: BLE001 - reporting what does not decode is the point
            if forgotten_cause(exc) is not None:  # erased on purpose (`chronicle forget`): not damage
                continue
            finding = Finding("unreadable_snapshot", f"it does not decode ({why(exc)}); loading passes over it and "
                              "replays the events", aggregate_id=str(stored.originator_id), version=stored.originator_version)
            if repair:
                store.delete_snapshot(UUID(str(stored.originator_id)), stored.originator_version)
                finding.repaired = True
            yield finding


def _store_code(store: ChronicleStore, repair: bool) -> Iterator[Finding]:
    recorder: Any = store.recorder
    if store.backend != "postgresql" or not hasattr(recorder, "save_function_exists") or recorder.save_function_exists():
        return  # SQLite saves in Python; a recorder named by APPLICATION_RECORDER_TOPIC is its own
    from .chain_postgres import SAVE_FUNCTION

    finding = Finding("missing_save_function", f"the schema has no {SAVE_FUNCTION}(), which every save calls")
    if repair:
        recorder.create_save_function()
        finding.repaired = recorder.save_function_exists()
    yield finding


def _file_damage(store: ChronicleStore) -> Finding | None:
    """A damaged SQLite file, with the tables it touches: every command that read them failed on it, while `doctor`
    (which reads only the log and the index) said "no problems found"."""
    if store.backend != "sqlite":
        return None
    datastore: Any = store.recorder.datastore
    with datastore.transaction(commit=False) as cursor:
        try:
            cursor.execute("PRAGMA quick_check")
            said = [line for row in cursor.fetchall() for line in str(row[0]).splitlines() if not line.startswith("*** in database")]
        except Exception as exc:  # noqa: BLE001 - the schema itself unreadable: damage too
            said = [first_line(exc)]
        if said == ["ok"]:
            return None
        damaged: list[str] = []
        try:
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
            for (table,) in cursor.fetchall():
                try:
                    cursor.execute(f'PRAGMA quick_check("{table}")')  # the table and its indexes
                    if [str(row[0]) for row in cursor.fetchall()] != ["ok"]:
                        damaged.append(str(table))
                except Exception:  # noqa: BLE001 - a table its check cannot even read is damaged
                    damaged.append(str(table))
        except Exception:  # noqa: BLE001 - which tables cannot be said; the damage still is
            pass
    where = f"damaged tables: {', '.join(damaged)}" if damaged else "the tables it touches cannot be named"
    events = "stored_events" in damaged or not damaged
    told = ("the event log itself is damaged: events may be lost" if events
            else "the event log is whole; the damaged tables are derived from it")
    return Finding("damaged_file", f"the SQLite file is damaged ({said[0]}{f'; and {len(said) - 1} more' if len(said) > 1 else ''}); "
                   f"{where}; {told}; nothing else was checked")
