"""Forget a session: destroy its tree's data key, so its content is unreadable everywhere.

The events stay (the hash chain covers their ciphertext, so `verify` still passes); what goes is
the only key that could read them, then every plaintext copy the store keeps beside them: the
read models are rebuilt (they cannot decode the erased events, so they keep nothing of them), and
the database's free space is cleared of the old pages (SQLite: VACUUM and a truncated WAL;
PostgreSQL: VACUUM of the key and read-model tables). See runtime/shredding.py.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from ..actor import recorded_actor
from ..shredding import LEGACY, TreeKeyMapper
from ..store import ChronicleStore
from .errors import AppError
from .queries import session_id


@dataclass(frozen=True)
class Forgotten:
    tree_id: UUID
    session_ids: list[UUID]
    at: str
    actor: str

    def as_json(self) -> dict[str, Any]:
        return {"tree_id": str(self.tree_id), "session_ids": [str(s) for s in self.session_ids], "forgotten_at": self.at,
                "actor": self.actor}


def forget(store: ChronicleStore, ref: str | UUID, actor: str | None = None) -> Forgotten:
    """Erase the tree of session `ref` (the session, its sub-agents and forks): exit 2 when the store
    cannot erase (no encryption, a tree written before tree keys), nothing changed then."""
    mapper = store.mapper
    if not isinstance(mapper, TreeKeyMapper):
        raise AppError("forget needs encryption at rest: a store created with CHRONICLE_CIPHER_KEY set "
                       "(unencrypted content cannot be erased without breaking the hash chain)", 2)
    sid = session_id(store, ref)
    tree = mapper.tree_of_aggregate(sid)
    if tree is None or tree == LEGACY:
        raise AppError(f"session {sid} was written before per-session keys existed in this store; it cannot be "
                       "forgotten on its own", 2)
    members = [s for s in store.session_ids() if mapper.tree_of_aggregate(s) == tree]
    who = recorded_actor(actor)
    at = mapper.keys.destroy(tree, who)
    for member in members:
        store.forget_in_index(member, tree, who)
    from ..read_models import projection_engine

    projection_engine(store).rebuild()
    clear_free_space(store)
    return Forgotten(tree, members, at, who)


def clear_free_space(store: ChronicleStore) -> None:
    """Old pages of rewritten rows (the wrapped key, dropped read-model tables) out of the files."""
    recorder: Any = store.recorder
    if store.backend == "sqlite":
        with recorder.datastore.get_connection(commit=True) as conn:
            raw = conn._sqlite_conn  # autocommit: VACUUM and a checkpoint cannot run inside a transaction
            raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            raw.execute("VACUUM")
            raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return
    from ..pg_options import connect, login

    with connect(login(store.url), autocommit=True) as conn:
        schema = recorder.datastore.schema or "public"
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s "
            "AND (table_name LIKE 'proj%%' OR table_name = 'chronicle_tree_keys')", (schema,))]
        for table in tables:
            conn.execute(f'VACUUM "{schema}"."{table}"')
