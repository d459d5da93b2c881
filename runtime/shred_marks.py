"""What a stored state says of its session tree, and the refusal of a write into a forgotten one.

Apart from runtime/shredding.py (which imports the cipher library) because the recorders import
this for every store, and a plain store should not pay for `cryptography` it never uses.

Why the recorder checks, in the save's own transaction, rather than the process's key cache: a
running process (`serve`, a worker, a long `chat`, a program using the library) holds the data keys
it has read, so after `chronicle forget` in another process it could still encrypt new events of
the erased tree with the destroyed key, or start new aggregates under the erased id. The check
reads the key table while the save holds the log's write lock (SQLite's single writer; on
PostgreSQL the events table's EXCLUSIVE lock, which `TreeKeys.destroy` takes too), so a save and
a forget are strictly ordered: a save either commits before the key is destroyed (and is erased
with the rest of the tree) or is refused, whole, with nothing recorded. It costs one primary-key
lookup per save that holds tree-keyed events (not per event): a few microseconds in SQLite's
process, and no round trip on PostgreSQL, where it runs inside the save function. Snapshots go
through a recorder of their own and are checked in their own insert the same way (SQLite: after the
INSERT, `snapshot_store.SQLiteSnapshotRecorder`; PostgreSQL: the insert statement locks the key row
FOR SHARE, `pg_datastore.SnapshotRecorder`), not by a read of the key row before it. Watching the
session index's `SessionForgotten` entries or LISTEN/NOTIFY would only be as good as the watcher's
last look, which is a race a write must not lose; reads, which cannot leak anything new into the
store, are bounded by `TreeKeys.fresh_for` instead.
"""

from __future__ import annotations

from typing import Any, Iterable, Sequence
from uuid import UUID

MAGIC = b"\xffchrtk1\xff"
HEADER = len(MAGIC) + 16
KEYS_TABLE = "chronicle_tree_keys"
#: The message prefix the PostgreSQL save function raises with (chain_postgres.py), then the tree id.
PG_REFUSAL = "chronicle: forgotten tree "


class ForgottenContent(Exception):
    """The content of a forgotten session tree: its key was destroyed on purpose."""

    forgotten = True  # projections skip such events silently (projections/engine.py)

    def __init__(self, tree: UUID, at: str | None) -> None:
        self.tree, self.at = tree, at
        super().__init__(f"session tree {tree} was forgotten{f' on {at}' if at else ''}: its content is erased "
                         "(`chronicle forget`; `chronicle audit` shows by whom)")


def tree_of_header(state: bytes) -> UUID | None:
    return UUID(bytes=state[len(MAGIC):HEADER]) if state.startswith(MAGIC) and len(state) > HEADER else None


def trees_of(states: Iterable[bytes]) -> set[UUID]:
    """The session trees whose keys sealed these states (none for plain or master-key states)."""
    return {UUID(bytes=s[len(MAGIC):HEADER]) for s in states if s[:len(MAGIC)] == MAGIC and len(s) > HEADER}


def refuse_forgotten_sqlite(cursor: Any, trees: Sequence[UUID]) -> None:
    """Inside the save's write transaction: ForgottenContent if any of `trees` was forgotten."""
    cursor.execute(f"SELECT tree_id, forgotten_at FROM {KEYS_TABLE} WHERE wrapped IS NULL AND tree_id IN "
                   f"({','.join('?' * len(trees))})", [str(t) for t in trees])
    row = cursor.fetchone()
    if row is not None:
        raise ForgottenContent(UUID(row[0]), row[1])


def refuse_forgotten_postgres(cursor: Any, keys_table: Any, trees: Sequence[UUID]) -> None:
    """After a guarded snapshot insert wrote nothing: ForgottenContent naming the tree (and when) that
    stopped it. Asked only on that refusal, so a snapshot written costs no statement more."""
    cursor.execute(f"SELECT tree_id, forgotten_at FROM {keys_table} WHERE wrapped IS NULL AND tree_id = ANY(%s)",
                   ([str(t) for t in trees],))
    row = cursor.fetchone()
    if row is None:  # no row at all: a key never stored is as unusable as a destroyed one
        raise ForgottenContent(trees[0], None)
    tree, at = (row["tree_id"], row["forgotten_at"]) if isinstance(row, dict) else (row[0], row[1])
    raise ForgottenContent(UUID(str(tree)), at)


def forgotten_cause(exc: BaseException | None) -> ForgottenContent | None:
    """The ForgottenContent behind an error, however deeply eventsourcing wrapped it (and the PostgreSQL
    save function's refusal, which arrives as a database error carrying `PG_REFUSAL`)."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ForgottenContent):
            return exc
        text = str(exc)
        if PG_REFUSAL in text:
            tree, _, at = text.split(PG_REFUSAL, 1)[1].partition(" at ")
            try:
                return ForgottenContent(UUID(tree.strip()[:36]), at.strip().splitlines()[0] if at.strip() else None)
            except ValueError:
                pass
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None
