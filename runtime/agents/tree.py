"""A session's sub-agent tree, found through the store alone.

Children are found from the parent's own events: each delegate call's children have ids
derived from the call's id and the task index, so walking a tree costs a few aggregate reads
per delegate call rather than a scan of every session.

That is how every delegate call this code records names its children, but not every sub-agent
session in a store was named so: the sub-agents of the v1 and v2 fixture stores, like any session
a program started with a `parent_session_id` of its own choosing, are linked to their parent by
that field alone. `export`, `verify SESSION`, `log --tree` and `export-traces` must not leave those
out, so they read the tree through `session_tree`, which passes `parents` (`sub_agents_by_parent`:
every listed session's parent, read from its `Session.Started`, upcast as `sessions` reads it), and
the walk adds the children it names to those the delegate calls name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator, Mapping
from uuid import UUID

from eventsourcing.persistence import StoredEvent

from chronicle.domain.content import Usage
from chronicle.domain.session import Session
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.store_rows import as_uuid, event_rows

from .children import find_session


@dataclass(frozen=True)
class TreeNode:
    session: Session
    depth: int


#: A parent session's id -> its sub-agents' ids, oldest first (`sub_agents_by_parent`).
Parents = Mapping[UUID, list[UUID]]


def lineage(store: ChronicleStore, session: Session) -> list[Session]:
    """The top-level session, each sub-agent's session down the parent links, and `session` last."""
    chain = [session]
    while chain[0].parent_session_id is not None:
        parent = find_session(store, chain[0].parent_session_id)
        if parent is None:
            break
        chain.insert(0, parent)
    return chain


def children_of(store: ChronicleStore, session: Session, parents: Parents | None = None) -> list[Session]:
    """The session's sub-agents: those its delegate calls name, in delegation order, then (with
    `parents`) any other session naming it as its parent, in the order they were listed."""
    ids = list(dict.fromkeys([*store.delegated_session_ids(session), *(parents or {}).get(session.id, [])]))
    found = (find_session(store, sid) for sid in ids)
    return [child for child in found if child is not None and child.parent_session_id == session.id]


def walk(store: ChronicleStore, root: Session, depth: int = 0, parents: Parents | None = None) -> Iterator[TreeNode]:
    """The session, then each child's subtree, depth-first in delegation order."""
    yield TreeNode(root, depth)
    for child in children_of(store, root, parents):
        yield from walk(store, child, depth + 1, parents)


def session_tree(store: ChronicleStore, root: Session, parents: Parents | None = None) -> list[TreeNode]:
    """The whole tree below `root`, every kind of sub-agent found: what a reader that shows or exports a
    tree walks. `parents` may be handed in by a caller that reads the tree again (`log --tree --follow`)."""
    return list(walk(store, root, parents=sub_agents_by_parent(store) if parents is None else parents))


def sub_agents_by_parent(store: ChronicleStore) -> dict[UUID, list[UUID]]:
    """Every listed session's parent, from its first event (one query per 500 sessions): what finds
    the sub-agents no delegate call names. A session of a forgotten tree is not listed, so never read."""
    found: dict[UUID, list[UUID]] = {}
    ids = store.session_ids()
    for start in range(0, len(ids), 500):
        for _position, oid, version, topic, state in event_rows(store, ids[start:start + 500], ".Started", 1):
            event = store.mapper.to_domain_event(StoredEvent(as_uuid(oid), version, topic, bytes(state)))
            parent = getattr(event, "parent_session_id", None)
            if parent is not None:
                found.setdefault(UUID(str(parent)), []).append(event.originator_id)
    return found


def own_usage(store: ChronicleStore, session: Session) -> Usage:
    """Tokens of every model response recorded on the session's turns (children not included)."""
    total = Usage()
    for tid in session.turns:
        for step in store.turn(tid).steps:
            total = total + Usage.model_validate(step["response"].get("usage") or {})
    return total


def tree_usage(store: ChronicleStore, root: Session) -> Usage:
    """The session's usage with all its descendants' rolled up into it."""
    total = Usage()
    for node in walk(store, root):
        total = total + own_usage(store, node.session)
    return total
