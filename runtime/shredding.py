"""Erasure by crypto-shredding: each session tree's payloads under a data key of its own.

An append-only, hash-chained log cannot delete a row without breaking its proof, and an erasure
request (GDPR art. 17, a customer leaving) must still be honoured. So with encryption at rest on
(CHRONICLE_CIPHER_KEY), every event and snapshot of a session tree — the session, its turns and
tool calls, its sub-agents and forks — is encrypted with a random 256-bit data key of that tree,
and only that key is wrapped by the master key and kept, in its own table `chronicle_tree_keys`.
`chronicle forget` destroys the wrapped key: the ciphertext stays where it is (the chain's digests
cover it, so `verify` still passes) but nobody, master key or not, can read it again.

A tree-keyed state is `MAGIC | tree id (16 bytes) | nonce (12) | AES-GCM ciphertext+tag` with the
tree id and the aggregate id as associated data, so a state cannot be moved to another aggregate
or tree unnoticed. Everything else (index logs, leases, attachments, which are shared by content
hash) keeps eventsourcing's master-key format, as do the events of trees begun before tree keys
existed: a tree's format is fixed by its first event, so an old store goes on working unchanged.

Which tree an event belongs to is known from the event that creates its aggregate: a top-level
session starts a tree; a sub-agent's session joins its parent's tree, a fork its origin's (a fork's
head holds the origin's turns); a Turn, ToolCall, delegated task, job, routine run or repair names
its session. Later events of an aggregate
find its tree from the header of the aggregate's first stored event (cached per process).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any
from uuid import UUID

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from eventsourcing.domain import Snapshot
from eventsourcing.persistence import Mapper, StoredEvent

from .event_versions import VersionedMapper
from .shred_marks import HEADER, KEYS_TABLE, MAGIC, PG_REFUSAL, ForgottenContent, forgotten_cause, tree_of_header

__all__ = ["HEADER", "KEYS_TABLE", "LEGACY", "MAGIC", "PG_REFUSAL", "ForgottenContent", "TreeKeyMapper", "TreeKeys",
           "forgotten_cause", "tree_of_header"]

LEGACY = UUID(int=0)  # a tree whose events use the master key alone (begun before tree keys)
#: Aggregates of chronicle.domain that are not a session tree's content: a lease names a session
#: but holds nothing of it, an attachment is shared by content hash. Every other one whose creating
#: event names its session (Turn, ToolCall, DelegatedTask, Job, RoutineRun, Repair) joins that tree.
SHARED = ("SessionLease", "Attachment")


@dataclass
class KeyRow:
    wrapped: bytes | None
    forgotten_at: str | None


class TreeKeys:
    """The key table, through the store's own recorder connection (SQLite or PostgreSQL).

    Keys are cached per process, so a forget made by another process must reach this one: a write
    is checked in the save's own transaction (runtime/shred_marks.py), and a read trusts a cached
    key for `fresh_for` seconds after it last saw the key's row, then reads the row again (one
    primary-key query per tree per period, never per event). A tree seen forgotten stays so here.
    """

    #: How long a cached key is used for reading before its row is looked at again (a forget made
    #: elsewhere stops this process's readers within this long; its writers at once).
    fresh_for = 1.0
    #: The clock of `fresh_for` (a test gives it one of its own).
    clock = staticmethod(time.monotonic)

    def __init__(self, recorder: Any, master_key: bytes, sqlite: bool) -> None:
        self.recorder = recorder
        self.master = AESGCM(master_key)
        self.sqlite = sqlite
        self._keys: dict[UUID, bytes] = {}
        self._seen: dict[UUID, float] = {}  # tree -> when its row last held the key
        self._gone: dict[UUID, str | None] = {}  # trees seen forgotten -> when
        self._ready = False

    def _table(self) -> str:
        if self.sqlite:
            return KEYS_TABLE
        return f'"{self.recorder.datastore.schema or "public"}"."{KEYS_TABLE}"'

    def _sql(self, statement: str) -> str:
        return statement.replace("{t}", self._table()).replace("?", "?" if self.sqlite else "%s")

    def ensure(self) -> None:
        if self._ready:
            return
        kind = "BLOB" if self.sqlite else "bytea"
        with self.recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(self._sql(
                f"CREATE TABLE IF NOT EXISTS {{t}} (tree_id TEXT PRIMARY KEY, wrapped {kind}, created_at TEXT NOT NULL, "
                "forgotten_at TEXT, forgotten_by TEXT)"
            ))
        self._ready = True

    def row(self, tree: UUID) -> KeyRow | None:
        self.ensure()
        with self.recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute(self._sql("SELECT wrapped, forgotten_at FROM {t} WHERE tree_id = ?"), (str(tree),))
            found = cursor.fetchone()
        if found is None:
            return None
        wrapped, at = (found[0], found[1]) if self.sqlite else (found["wrapped"], found["forgotten_at"])
        return KeyRow(bytes(wrapped) if wrapped is not None else None, at)

    def key(self, tree: UUID) -> bytes:
        """The tree's data key, unwrapped; ForgottenContent once destroyed (here, or elsewhere and
        seen within `fresh_for`)."""
        key = self._keys.get(tree)
        if key is not None and self.clock() - self._seen.get(tree, -self.fresh_for) < self.fresh_for:
            return key
        if tree in self._gone:
            raise ForgottenContent(tree, self._gone[tree])
        row = self.row(tree)
        if row is None or row.wrapped is None:
            self.drop(tree, row.forgotten_at if row else None)
            raise ForgottenContent(tree, row.forgotten_at if row else None)
        key = key or self.master.decrypt(row.wrapped[:12], row.wrapped[12:], tree.bytes)
        self._keys[tree] = key
        self._seen[tree] = self.clock()
        return key

    def check(self, tree: UUID) -> None:
        """ForgottenContent if the tree is forgotten, as `key` sees it: a reader of an aggregate this
        process has cached (decoded before the forget) asks this before handing it out."""
        self.key(tree)

    def drop(self, tree: UUID, at: str | None) -> None:
        """Forget the key here: the tree was seen forgotten (a refused save, a row without its key)."""
        self._keys.pop(tree, None)
        self._seen.pop(tree, None)
        self._gone[tree] = at

    def create(self, tree: UUID) -> bytes:
        """A new tree's key, stored wrapped before any of its events (an unused key left by a failed
        save is harmless; a second creator of the same tree reads the first one's key)."""
        if tree in self._keys:
            return self.key(tree)
        self.ensure()
        key = os.urandom(32)
        nonce = os.urandom(12)
        wrapped = nonce + self.master.encrypt(nonce, key, tree.bytes)
        insert = "INSERT OR IGNORE INTO {t} VALUES (?, ?, ?, NULL, NULL)" if self.sqlite else \
            "INSERT INTO {t} VALUES (?, ?, ?, NULL, NULL) ON CONFLICT (tree_id) DO NOTHING"
        with self.recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(self._sql(insert), (str(tree), wrapped, _now()))
        return self.key(tree)

    def wrapped(self, tree: UUID) -> bytes:
        """The tree's key as stored (wrapped by the master key): what an export carries."""
        row = self.row(tree)
        if row is None or row.wrapped is None:
            raise ForgottenContent(tree, row.forgotten_at if row else None)
        return row.wrapped

    def install(self, tree: UUID, wrapped: bytes) -> None:
        """A tree's wrapped key from a bundle: it must unwrap with this store's master key, and a tree
        forgotten here stays forgotten."""
        self.master.decrypt(wrapped[:12], wrapped[12:], tree.bytes)  # InvalidTag: another master key
        row = self.row(tree)
        if row is not None:
            if row.wrapped is None:
                raise ForgottenContent(tree, row.forgotten_at)
            return
        insert = "INSERT OR IGNORE INTO {t} VALUES (?, ?, ?, NULL, NULL)" if self.sqlite else \
            "INSERT INTO {t} VALUES (?, ?, ?, NULL, NULL) ON CONFLICT (tree_id) DO NOTHING"
        with self.recorder.datastore.transaction(commit=True) as cursor:
            cursor.execute(self._sql(insert), (str(tree), wrapped, _now()))

    def destroy(self, tree: UUID, actor: str) -> str:
        """Overwrite the wrapped key (SQLite's secure_delete zeroes the old bytes in the page)."""
        self.ensure()
        at = _now()
        with self.recorder.datastore.transaction(commit=True) as cursor:
            if self.sqlite:
                cursor.execute("PRAGMA secure_delete = ON")
            else:  # the lock every save takes: a save in flight commits first, any later one sees the forget
                schema = self.recorder.datastore.schema or "public"
                cursor.execute(f'LOCK TABLE "{schema}"."{self.recorder.events_table_name}" IN EXCLUSIVE MODE')
            cursor.execute(self._sql("UPDATE {t} SET wrapped = NULL, forgotten_at = ?, forgotten_by = ? WHERE tree_id = ?"),
                           (at, actor, str(tree)))
        self.drop(tree, at)
        return at


def _now() -> str:
    return datetime.now(timezone.utc).isoformat()


class TreeKeyMapper(VersionedMapper):
    """The store's Mapper (runtime/event_versions.py) with the master-key cipher, plus tree keys for session trees."""

    def __init__(self, mapper: Mapper, keys: TreeKeys) -> None:  # type: ignore[type-arg]
        super().__init__(mapper.transcoder, mapper.compressor, mapper.cipher)
        self._plain: Mapper = VersionedMapper(mapper.transcoder, mapper.compressor, None)  # type: ignore[type-arg]
        self.keys = keys
        self._trees: dict[UUID, UUID] = {}  # aggregate id -> tree id (LEGACY: master key only)

    # -- which tree ----------------------------------------------------------------------------

    def tree_of_aggregate(self, aggregate_id: UUID) -> UUID | None:
        """The tree an aggregate's stored events say it belongs to (None: nothing stored yet)."""
        if aggregate_id in self._trees:
            return self._trees[aggregate_id]
        rows = self.keys.recorder.select_events(aggregate_id, limit=1)
        if not rows:
            return None
        tree = tree_of_header(rows[0].state) or LEGACY
        self._trees[aggregate_id] = tree
        return tree

    def unsaved(self, events: Any) -> None:
        """A save that recorded nothing: the trees its new aggregates (their first event among `events`) were given
        are not theirs yet, so they are looked up again. A retry may make the same aggregate in another tree: a
        routine's run, refused because the session it named was erased, is fired again into a new session; the tree
        kept from the refused attempt named the erased one, and refused every retry."""
        for event in events:
            if event.originator_version == 1:
                self._trees.pop(event.originator_id, None)

    def check_aggregate(self, aggregate_id: UUID) -> None:
        """ForgottenContent if the aggregate's tree (as this process decoded or wrote it) was forgotten:
        a cached aggregate is plaintext in memory, handed out without decoding anything again."""
        tree = self._trees.get(aggregate_id)
        if tree is not None and tree != LEGACY:
            self.keys.check(tree)

    def _tree_of_event(self, event: Any) -> UUID | None:
        oid = event.originator_id
        if oid in self._trees:
            return self._trees[oid]
        if isinstance(event, Snapshot):  # eventsourcing's own class: the aggregate's is in its `topic`
            module, _, name = str(getattr(event, "topic", "")).partition(":")
            if not module.startswith("chronicle.domain.") or name in SHARED:
                return None
            tree = self.tree_of_aggregate(oid) or LEGACY
            self._trees[oid] = tree
            return tree
        owner = type(event).__qualname__.split(".")[0]
        if owner in SHARED or not type(event).__module__.startswith("chronicle.domain."):
            return None
        if event.originator_version == 1:
            origin = getattr(event, "session_id", None) or getattr(event, "parent_session_id", None)
            if owner == "Session":
                origin = getattr(event, "parent_session_id", None) or (getattr(event, "forked_from", None) or {}).get("session_id")
                if not origin:
                    tree = self._trees[oid] = oid
                    self.keys.create(tree)
                    return tree
            tree = (self.tree_of_aggregate(UUID(str(origin))) if origin else None) or LEGACY
        else:
            tree = self.tree_of_aggregate(oid) or LEGACY
        self._trees[oid] = tree
        return tree

    # -- encoding ------------------------------------------------------------------------------

    def to_stored_event(self, domain_event: Any) -> StoredEvent:
        tree = self._tree_of_event(domain_event)
        if tree is None or tree == LEGACY:
            return super().to_stored_event(domain_event)
        # A snapshot is checked against the key table by its recorder, in its insert's transaction
        # (runtime/snapshot_store.py, runtime/pg_datastore.py), as an event is by the save's.
        plain = self._plain.to_stored_event(domain_event)
        nonce = os.urandom(12)
        sealed = AESGCM(self.keys.key(tree)).encrypt(nonce, plain.state, tree.bytes + _uuid_bytes(plain.originator_id))
        return StoredEvent(plain.originator_id, plain.originator_version, plain.topic, MAGIC + tree.bytes + nonce + sealed)

    def to_domain_event(self, stored_event: StoredEvent) -> Any:
        tree = tree_of_header(stored_event.state)
        if tree is None:
            return super().to_domain_event(stored_event)
        if isinstance(stored_event.originator_id, UUID):  # for `check_aggregate`, on the cached copy
            self._trees.setdefault(stored_event.originator_id, tree)
        body = stored_event.state[HEADER:]
        try:
            plain = AESGCM(self.keys.key(tree)).decrypt(body[:12], body[12:], tree.bytes + _uuid_bytes(stored_event.originator_id))
        except InvalidTag:
            raise ValueError(f"the state of {stored_event.originator_id} v{stored_event.originator_version} "
                             "does not decrypt with its tree's key (edited or moved)") from None
        return self._plain.to_domain_event(
            StoredEvent(stored_event.originator_id, stored_event.originator_version, stored_event.topic, plain)
        )


def forgotten(mapper: Any, aggregate_id: UUID) -> bool:
    """Whether the aggregate is of a session tree `chronicle forget` erased, as this process can see
    (a forget elsewhere within `TreeKeys.fresh_for`); False in a store without tree keys, or for an
    aggregate with nothing stored."""
    if not isinstance(mapper, TreeKeyMapper):
        return False
    tree = mapper.tree_of_aggregate(aggregate_id)
    if tree is None or tree == LEGACY:
        return False
    try:
        mapper.keys.check(tree)
    except ForgottenContent:
        return True
    return False


def _uuid_bytes(value: Any) -> bytes:
    return value.bytes if isinstance(value, UUID) else UUID(str(value)).bytes
