"""A session's sub-agent tree, found through the store alone.

Children are found from the parent's own events: each delegate call's children have ids
derived from the call's id and the task index, so walking a tree costs a few aggregate reads
per delegate call rather than a scan of every session.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

from chronicle.domain.content import Usage
from chronicle.domain.session import Session
from chronicle.runtime.store import ChronicleStore

from .children import find_session


@dataclass(frozen=True)
class TreeNode:
    session: Session
    depth: int


def children_of(store: ChronicleStore, session: Session) -> list[Session]:
    found = (find_session(store, sid) for sid in store.delegated_session_ids(session))
    return [child for child in found if child is not None]


def lineage(store: ChronicleStore, session: Session) -> list[Session]:
    """The top-level session, each sub-agent's session down the parent links, and `session` last."""
    chain = [session]
    while chain[0].parent_session_id is not None:
        parent = find_session(store, chain[0].parent_session_id)
        if parent is None:
            break
        chain.insert(0, parent)
    return chain


def walk(store: ChronicleStore, root: Session, depth: int = 0) -> Iterator[TreeNode]:
    """The session, then each child's subtree, depth-first in delegation order."""
    yield TreeNode(root, depth)
    for child in children_of(store, root):
        yield from walk(store, child, depth + 1)


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
