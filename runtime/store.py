"""The event store: one eventsourcing Application over SQLite or PostgreSQL, picked by URL.

Sessions are found through an event-sourced index log (the repository cannot list
aggregates). Reading a session's events in commit order uses the backend's notification id
directly, so `log` costs one indexed query rather than a scan of the whole store.
"""

from __future__ import annotations

import base64
import random
import threading
import time
from functools import cached_property
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator
from uuid import UUID

from eventsourcing.application import EventSourcedLog, LRUCache, ProcessingEvent
from eventsourcing.domain import Aggregate, DomainEvent
from eventsourcing.persistence import IntegrityError, Recording, StoredEvent
from eventsourcing.utils import get_topic

from chronicle.domain.errors import DomainError
from chronicle.domain.ids import SESSION_INDEX_ID, prefix_bounds
from chronicle.domain.session import Session
from chronicle.domain.turn import Turn
from chronicle.projections.sql import retry_creation

from .aggregate_copy import copy_aggregate
from .aggregate_reads import AggregateReads
from .chain import chained_recorder_topic
from .chain_reader import topic_names
from .compression import COMPRESSOR_TOPIC
from .config import checking_writes, eventsourcing_env, redact, relaxed_commits
from .encryption import check_readable, cipher_env
from .event_versions import MAPPER_TOPIC
from .pasteable import pasteable
from .pending import NextEntry
from .session_tree_reads import SessionTreeReads
from .snapshot_store import SnapshotStore, SQLiteSnapshotRecorder
from .sqlite_pool import cache_statements
from .store_errors import ForgottenSession as ForgottenSession
from .store_errors import NotFound as NotFound  # where callers look for them
from .store_errors import UnknownSession as UnknownSession
from .store_errors import UnreadableEvent as UnreadableEvent
from .store_errors import is_read_only_error as is_read_only_error  # where commands' error handlers look
from .store_errors import unreadable_event
from .store_identity import check_postgres, check_store, read_only_sqlite_uri
from .store_rows import SQLiteVersionLookup, as_uuid, blob_states, event_rows, ids_in_range, latest_version
from .store_snapshots import SnapshotKeeping
from .transcoder import TRANSCODER_TOPIC

#: Forks whose first head a store remembers (`first_head`); a tuple of turn ids each.
FIRST_HEADS_KEPT = 1024

#: Guards the first opening of a store's SQLiteVersionLookup.
_LOOKUP_LOCK = threading.Lock()


class SessionLogged(DomainEvent):
    session_id: UUID


class SessionUnlisted(DomainEvent):
    """An index entry withdrawn by `chronicle doctor --repair`: it named a session with no events.

    The index is append-only like everything else, so a repair is one more entry saying which
    earlier entry no longer counts and why, never a deleted row."""

    session_id: UUID
    reason: str


class SessionForgotten(DomainEvent):
    """`chronicle forget`: the session's tree key was destroyed (runtime/shredding.py), so its content
    is unreadable; the entry withdraws it from listings and tells the audit who erased it and when.
    It names ids only: nothing of the erased content is written again."""

    session_id: UUID
    tree_id: UUID
    actor: str


#: Tries of a session write before it gives up: a control's, and a running turn's own (`update_session`).
CONTROL_ATTEMPTS = 20
TURN_ATTEMPTS = 100


class ChronicleStore(AggregateReads, SessionTreeReads, SnapshotKeeping):
    name = "chronicle"
    snapshotting_intervals = {Session: 100, Turn: 100}

    def __init__(self, url: str, env: dict[str, str] | None = None, read_only: bool = False, create: bool = True) -> None:
        self.url = url
        #: False for a command that reads, or acts on what a store holds: on PostgreSQL a database or schema with
        #: no store is `NoStore`, and nothing is created there (SQLite's missing file is refused before the open).
        self.create = create
        #: Settings given here rather than in the environment: another process opening this store
        #: (a rebuild's helper, runtime/parallel_rebuild.py) needs them too.
        self.env_overrides = dict(env or {})
        #: Opened for reading only (a store on a read-only file, directory or mount): nothing is
        #: created, projections are read as they stand (runtime/read_models.py).
        self.read_only = read_only
        settings = {**eventsourcing_env(url), **(env or {})}
        # Hash chain (runtime/chain.py): the recorder writes each event's link in the event's own
        # transaction. The only change to how events are stored; `chronicle verify` reads the links.
        settings.setdefault("APPLICATION_RECORDER_TOPIC", chained_recorder_topic(settings["PERSISTENCE_MODULE"]))
        # Large states are stored compressed; old uncompressed rows read as they are (runtime/compression.py).
        settings.setdefault("COMPRESSOR_TOPIC", COMPRESSOR_TOPIC)
        # Stored states decoded by pydantic-core's parser, encoded exactly as before (runtime/transcoder.py).
        settings.setdefault("TRANSCODER_TOPIC", TRANSCODER_TOPIC)
        # An event a newer Chronicle wrote (a class_version above this code's) is refused, not misread (runtime/event_versions.py).
        settings.setdefault("MAPPER_TOPIC", MAPPER_TOPIC)
        # Encryption at rest (runtime/encryption.py): CHRONICLE_CIPHER_KEY turns on eventsourcing's AES-GCM cipher.
        settings.update(cipher_env())
        #: PostgreSQL: which recorders' tables are set up already (runtime/schema_marks.py), read
        #: with the store's identity when its factory is built (`construct_factory`).
        self._schema_marks: frozenset[str] = frozenset()
        check_store(settings)
        if read_only and settings["PERSISTENCE_MODULE"] == "eventsourcing.sqlite":
            settings.update(SQLITE_DBNAME=read_only_sqlite_uri(Path(settings["SQLITE_DBNAME"])), CREATE_TABLE="n")
        try:
            super().__init__(env=settings)
            check_readable(self, encrypted="CIPHER_KEY" in settings)  # a wrong or missing key: one clear error now
        except BaseException:
            # The pool is open by now: closed here, not left to the collector, which finalised a PostgreSQL one on its
            # own pool's thread (eventsourcing's __del__ cannot join it from there). open_store_at retries a creation
            # race with a new store each time, and a wrong key is a ChronicleError a program may catch and carry on.
            factory = self.__dict__.get("factory")
            if factory is not None:
                factory.close()
            raise
        self.session_index = EventSourcedLog(self.events, SESSION_INDEX_ID, SessionLogged)
        #: The index as read so far (`session_ids`): the sessions listed, in order, and the last entry's version.
        self._listed: dict[UUID, None] = {}
        self._index_read = 0
        self._index_lock = threading.Lock()
        self._first_heads: LRUCache[UUID, tuple[UUID, ...]] = LRUCache(maxsize=FIRST_HEADS_KEPT)
        #: CHRONICLE_CHECK_EVENTS=1: every event is checked against the stored vocabulary before it is
        #: written, and a misfit is refused (runtime/stored_vocabulary.py). For development and the
        #: test suite: it encodes each event twice.
        self.check_events = checking_writes()
        #: CHRONICLE_DURABILITY: whether `save(..., rerunnable=True)` may skip waiting for the disk.
        self.relaxed_commits = relaxed_commits()

    def construct_factory(self, env: Any) -> Any:
        factory: Any = super().construct_factory(env)
        try:
            self._prepare(factory, env)
        except BaseException:  # a database that is not a Chronicle store, say: its pool is open already
            factory.close()
            raise
        return factory

    def _prepare(self, factory: Any, env: Any) -> None:
        if type(factory).__module__ == "eventsourcing.sqlite":
            cache_statements(factory.datastore)  # runtime/sqlite_pool.py: compiled once, not per transaction
        elif type(factory).__module__ == "eventsourcing.postgres":
            from .pg_datastore import defer_composite_types, logs_in_to_schema
            from .pg_options import libpq_options

            defer_composite_types(factory.datastore)
            logs_in_to_schema(factory.datastore)
            # The URL's libpq options (sslmode, …) with every login of the pool, its first one included.
            factory.datastore.pool.kwargs.update(libpq_options(self.url))
            # Before any recorder exists: they create tables, unless the marks say they are there.
            self._schema_marks = check_postgres(factory.datastore, f"{self.name}_events",
                                                own_schema=bool(env.get("POSTGRES_SCHEMA")), create=self.create)

    def construct_recorder(self) -> Any:
        if self._is_postgres_factory():
            from .schema_marks import application_recorder

            return application_recorder(self.factory, self._schema_marks)
        return super().construct_recorder()

    def construct_snapshot_store(self) -> Any:
        """eventsourcing's, except that a snapshot that does not decode is passed over, and the
        aggregate loaded from its events (runtime/snapshot_store.py): snapshots are caches."""
        if self._is_postgres_factory():
            from .schema_marks import snapshot_recorder

            return SnapshotStore(mapper=self.mapper, recorder=snapshot_recorder(self.factory, self._schema_marks))
        # A snapshot edited into TEXT reads as bytes (store_rows.SQLITE_STATE); one of a forgotten tree is refused.
        factory: Any = self.factory  # eventsourcing's SQLite factory: its datastore, its table setting
        recorder = SQLiteSnapshotRecorder(datastore=factory.datastore, events_table_name="stored_snapshots")
        if factory.env_create_table():
            recorder.create_table()
        return SnapshotStore(mapper=self.mapper, recorder=blob_states(recorder))

    def _is_postgres_factory(self) -> bool:
        return type(self.factory).__module__ == "eventsourcing.postgres"

    def construct_event_store(self) -> Any:
        """With encryption on, session trees get data keys of their own (runtime/shredding.py) so
        that `forget` can erase one; the recorder exists by now, and the snapshot store is built
        after this with the same mapper."""
        if self.mapper.cipher is not None:
            from .shredding import TreeKeyMapper, TreeKeys

            master = base64.b64decode(self.env.get("CIPHER_KEY") or "")
            keys = TreeKeys(self.recorder, master, sqlite=self.backend == "sqlite")
            keys.ensure()  # at open, like the other tables: open_store_at rides out a concurrent creation
            self.mapper = TreeKeyMapper(self.mapper, keys)
        return super().construct_event_store()

    @cached_property
    def backend(self) -> str:
        # Through the class's bases: the chained recorders subclass eventsourcing's (runtime/chain.py).
        # Cached: asked on every read and at every safe point, and the recorder never changes.
        return "postgresql" if any("postgres" in c.__module__ for c in type(self.recorder).__mro__) else "sqlite"

    def describe(self) -> str:
        return redact(self.url)

    # -- writing -------------------------------------------------------------------------------

    def create_session(self, session: Session, *others: Any) -> None:
        """Save a new session, its index entry and ``others`` in one transaction.

        Concurrent creators race for the same next slot of the index log; the loser retries with
        the next slot, and so does each `NextEntry` in ``others`` (another index log's entry). The
        pending events are collected once, before the first attempt: saving the aggregate again on
        a retry would find nothing pending and store the index entry alone, acknowledging a
        session that was never written. If the session itself already
        exists (a deterministic id created by another process), IntegrityError is raised for
        the caller to continue that one.
        """
        entries = [o for o in others if isinstance(o, NextEntry)]
        events = [e for aggregate in (session, *others) if not isinstance(aggregate, NextEntry) for e in aggregate.collect_events()]
        for attempt in range(200):
            logged = self.session_index.trigger_event(session_id=session.id)
            try:
                self.save(*events, logged, *(entry.make() for entry in entries))
                self._keep(session)
                self._first_heads.put(session.id, tuple(session.head))
                return
            except IntegrityError:
                if self._already_taken(events):
                    raise
                # Lost the index slot to another creator: back off a little, with jitter, so
                # many creators at once spread out instead of colliding in lockstep.
                time.sleep(random.uniform(0, min(0.05, 0.002 * (attempt + 1))))
        raise RuntimeError(f"could not index new session {session.id}: the session index kept changing")

    def update_session(
        self, session_id: UUID, command: Callable[[Session], object], *others: Any, attempts: int = CONTROL_ATTEMPTS,
        held: Session | None = None,
    ) -> Session:
        """Apply ``command(session)`` to a fresh copy of the session and save it with ``others``.

        Other processes write to a busy session too (queued inputs, steering, cancel requests),
        so a copy held across a turn is stale: saving it would conflict. The pending events of
        ``others`` are collected once and saved with the session in one transaction; on a
        version conflict the command is applied again to a fresh copy.

        ``attempts``: a control (steer, cancel, queue) gives up after `CONTROL_ATTEMPTS`; a running
        turn's own writes pass `TURN_ATTEMPTS`, so they outlast a burst of controls instead of the
        turn failing because requests kept arriving between its read and its write.

        ``held``: a copy the caller read and now gives up (it is changed and must not be used
        after; never the cached object `session(..., copy=False)` hands out). The first attempt
        applies the command to it instead of reading the session again: the store's version
        check refuses it if anything was written since, and the retry reads afresh as before.
        Nothing changed is the usual case, and it saves a query (a round trip on PostgreSQL) at
        each end of every turn.
        """
        events = [e for aggregate in others for e in aggregate.collect_events()]
        for attempt in range(attempts):
            if attempt == 0 and held is not None and held.id == session_id and not held.pending_events:
                session = held
                try:
                    command(session)
                except DomainError:
                    continue  # perhaps only because the copy is out of date: ask the fresh one
            else:
                session = self.session(session_id)
                command(session)
            if not events and not session.pending_events:
                return session  # the command found its change made already: nothing to write, nothing to race
            try:
                self.save(session, *events)
                return session
            except IntegrityError:
                if self._already_taken(events):
                    raise  # another writer advanced one of the others: retrying cannot help
                continue
        raise RuntimeError(f"session {session_id} kept changing under {attempts} attempts to save it")

    def _keep(self, session: Session) -> None:
        """Put a copy of the session just created in the aggregate cache: the next get (the first
        input, the first turn) fast-forwards from it with one query, instead of looking for a
        snapshot first and replaying. A copy, because the caller keeps the object it created."""
        if self.repository.cache is not None and not session.pending_events:
            self.repository.cache.put(session.id, copy_aggregate(session))

    def _already_taken(self, events: list[Any]) -> bool:
        """Whether the store already holds a version that one of these events claims."""
        firsts: dict[UUID, int] = {}
        for event in events:
            firsts.setdefault(event.originator_id, event.originator_version)
        return any(
            self.recorder.select_events(originator_id, gt=version - 1, limit=1)
            for originator_id, version in firsts.items()
        )

    def save(self, *objs: Any, rerunnable: bool = False, **kwargs: Any) -> list[Recording[UUID]]:
        """eventsourcing's `save`, collecting an aggregate's events without its two runtime-checkable
        Protocol checks per object (`DomainEventProtocol`, `CollectEventsProtocol`): ≈ 0.13 ms of
        each step's two saves. Anything that is not one of our aggregates (an event, an index
        log entry) goes through eventsourcing's own `collect_events`, checks and all.

        `rerunnable`: the commit records only work a resume does again if it is lost (a model's
        response, the results of tools that may run twice), so it need not wait for the disk
        (runtime/config.py, `relaxed_commits`)."""
        if rerunnable and self.relaxed_commits:
            kwargs["relaxed"] = True
        processing = ProcessingEvent[UUID]()
        for obj in objs:
            if isinstance(obj, Aggregate):
                processing.events.extend(obj.collect_events())
                processing.aggregates[obj.id] = obj
            elif obj is not None:
                processing.collect_events(obj)
        processing.saved_kwargs.update(kwargs)
        if self.check_events:
            from .stored_vocabulary import refuse_misfits

            refuse_misfits(self.mapper, processing.events)
        try:
            recordings = self._record(processing)
        except Exception as exc:
            unsaved = getattr(self.mapper, "unsaved", None)  # TreeKeyMapper: the new aggregates' trees are not settled
            if unsaved is not None:
                unsaved(processing.events)
            self._refused_if_forgotten(exc)
            raise
        try:
            self._take_snapshots(processing)
        except Exception as exc:  # a snapshot of a tree forgotten since: refused in its insert (snapshot_store.py)
            self._refused_if_forgotten(exc)
            raise
        self._notify(recordings)
        self.notify(processing.events)  # eventsourcing's deprecated hook, called as its save does
        return recordings

    def _refused_if_forgotten(self, exc: Exception) -> None:
        """A save into a tree another process forgot (runtime/shred_marks.py): its key goes from this
        process too, and the caller gets ForgottenContent ("session X was forgotten"), nothing recorded."""
        keys = getattr(self.mapper, "keys", None)
        if keys is None:
            return
        from .shred_marks import forgotten_cause

        erased = forgotten_cause(exc)
        if erased is not None:
            keys.drop(erased.tree, erased.at)
            raise erased from None

    def _notify(self, recordings: list[Any]) -> None:
        """After every save: running loops in this process learn their session changed."""
        from .control_probes import saved_here

        saved_here({r.domain_event.originator_id for r in recordings})

    # -- reading -------------------------------------------------------------------------------

    def session_ids(self) -> list[UUID]:
        """Every indexed session, oldest first, less the entries a repair withdrew or a forget erased.

        The index is only ever appended to, so a store reads each entry once: later calls read the entries after
        the last one seen (a listing, every scan of all sessions and a worker's rescan each replayed the whole index,
        30,000 entries at 30,000 sessions)."""
        with self._index_lock:
            for entry in self.session_index.get(gt=self._index_read or None):
                if isinstance(entry, (SessionUnlisted, SessionForgotten)):
                    self._listed.pop(entry.session_id, None)
                else:
                    self._listed[entry.session_id] = None
                self._index_read = entry.originator_version
            return list(self._listed)

    def unlist_session(self, session_id: UUID, reason: str) -> None:
        self._append_to_index(SessionUnlisted, session_id=session_id, reason=reason)

    def forget_in_index(self, session_id: UUID, tree_id: UUID, actor: str) -> None:
        self._append_to_index(SessionForgotten, session_id=session_id, tree_id=tree_id, actor=actor)

    def index_session(self, session_id: UUID) -> None:
        self._append_to_index(SessionLogged, session_id=session_id)

    def _append_to_index(self, cls: type, **fields: Any) -> None:
        for attempt in range(200):
            entry: Any = self.session_index._trigger_event(cls, **fields)
            try:
                self.save(entry)
                return
            except IntegrityError:
                time.sleep(random.uniform(0, min(0.05, 0.002 * (attempt + 1))))
        raise RuntimeError("could not write to the session index: it kept changing")

    def resolve_session_id(self, text: str) -> UUID:
        """Accept a full id or an unambiguous prefix, as people type them (git-style)."""
        if not text.strip():
            raise UnknownSession(f"an empty session id names no session; `{pasteable('sessions', self.url)}` lists them")
        try:
            full = UUID(text)
        except ValueError:
            full = None
        if full is not None:
            try:
                return self._get(full, Session, copy=False).id
            except ForgottenSession:
                raise  # erased on purpose: said so, with the one exit code every path gives it
            except NotFound:
                raise UnknownSession(f"no session {full}; `{pasteable('sessions', self.url)}` lists them") from None
        prefix = text.strip().lower()
        bounds = prefix_bounds(prefix)
        # A range of the events' primary key, not a read of the whole session index (30 ms at 3,000 sessions, in every
        # command given a prefix). The one session found is loaded, as a full id is: a forgotten one is said so here.
        found = ids_in_range(self, *bounds, SESSION_STARTED) if bounds is not None else []
        if len(found) == 1:
            return self._get(found[0], Session, copy=False).id
        if not found:
            raise UnknownSession(f"no session matches {text!r}; `{pasteable('sessions', self.url)}` lists them")
        ids = self.session_ids()  # several: the index says which are listed (a forgotten one is not)
        matches = [sid for sid in ids if str(sid).startswith(prefix)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            erased = {e.session_id for e in self.session_index.get()
                      if isinstance(e, SessionForgotten) and str(e.session_id).startswith(prefix)}
            if len(erased) == 1:  # the prefix `audit` shows on the forget row: say it was erased, as the full id does
                return self.resolve_session_id(str(erased.pop()))
            raise UnknownSession(f"no session matches {text!r}; `{pasteable('sessions', self.url)}` lists them")
        shown = ", ".join(str(sid) for sid in matches[:10]) + (f", … ({len(matches) - 10} more)" if len(matches) > 10 else "")
        raise UnknownSession(f"{text!r} matches {len(matches)} sessions: {shown}; give more of the id")

    def events_with_positions(
        self, originator_ids: Iterable[UUID], topic_suffix: str | None = None, version: int | None = None,
        offset: int = 0, limit: int | None = None, positions: tuple[int, int] | None = None,
    ) -> Iterator[tuple[int, Any]]:
        """Events of the given aggregates in commit order, each with its position in the log.

        `topic_suffix` (e.g. ".TurnEnded") and `version` narrow the query in SQL, so that time
        travel decodes the few events it looks for rather than every event of a long session;
        `offset`/`limit` page through what they select, `positions` (first, last) bounds it. An event
        that does not decode raises UnreadableEvent naming it, as loading its aggregate does (`log`)."""
        ids = list(originator_ids)
        if not ids:
            return
        rows = event_rows(self, ids, topic_suffix, version, offset, limit, positions)
        for position, originator_id, version, topic, state in rows:
            stored = StoredEvent(
                originator_id=as_uuid(originator_id),
                originator_version=version,
                topic=topic,
                state=bytes(state),
            )
            try:
                event = self.mapper.to_domain_event(stored)
            except Exception as exc:
                from .shred_marks import forgotten_cause

                if forgotten_cause(exc) is not None:
                    raise  # erased on purpose (`chronicle forget`): not damage
                raise unreadable_event(topic_names(topic)[0], as_uuid(originator_id), version, topic, exc) from exc
            yield position, event

    def latest_version(self, originator_id: UUID, position: int | None = None) -> int:
        """What a running loop asks at each safe point to learn whether steering or cancel arrived;
        with `position`, the aggregate's version as of that point in the log (0: it did not exist yet)."""
        if position is None and self.backend == "sqlite":
            lookup = self._version_lookup()
            if lookup is not None:
                return lookup(originator_id)
        return latest_version(self, originator_id, position)

    def _version_lookup(self) -> SQLiteVersionLookup | None:
        if "_lookup" not in self.__dict__:
            with _LOOKUP_LOCK:  # the loop's thread and the cancel watcher's may ask first together
                if "_lookup" not in self.__dict__:
                    datastore = self.recorder.datastore  # type: ignore[attr-defined]
                    usable = SQLiteVersionLookup.usable(datastore) and not self.closing.is_set()
                    table = self.recorder.events_table_name  # type: ignore[attr-defined]
                    self.__dict__["_lookup"] = SQLiteVersionLookup(datastore, table) if usable else None
        return self.__dict__["_lookup"]  # type: ignore[no-any-return]

    def close(self) -> None:
        lookup = self.__dict__.pop("_lookup", None)
        if lookup is not None:
            lookup.close()
        super().close()

    def max_position(self) -> int:
        return self.recorder.max_notification_id() or 0


#: The topic of every session's first event: the session index's own, found by a range scan (`ids_in_range`).
SESSION_STARTED = get_topic(Session.Started)

def open_store_at(url: str, attempts: int = 5, read_only: bool = False, create: bool = True) -> ChronicleStore:
    """Open the store, riding out the creation race of several processes that start at once on a
    fresh store: on PostgreSQL both create its tables and one sees "tuple concurrently updated";
    on SQLite one switches the new file to WAL while the other opens it, and the other's own
    switch fails at once with "database is locked" (SQLite's busy wait does not cover it)."""
    return retry_creation(lambda: ChronicleStore(url, read_only=read_only, create=create), attempts=attempts)
