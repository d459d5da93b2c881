"""What a session's conversation is made of in the log: what `export` writes and `verify SESSION` checks.

- the session's tree: the session and its sub-agents (runtime/agents/tree.py), each with its turns
  and their tool calls;
- what the forks among them inherit: a fork starts with a head that references turns of the
  session it was forked from (and, for a fork of a fork, of that one's origin), so its history,
  `history --at`, replay and its next turn all read those Turn and ToolCall aggregates. They are
  the origin's, recorded before the fork existed and ended by then, so they are taken whole; the
  origin session itself is not (its later turns are no part of the fork, and its queue and state
  would make it a second, truncated session wherever the fork goes);
- the task board of every session in the tree (DelegatedTask aggregates, whatever their state):
  the tasks posted on its board (listed by its board index log) and those its delegate calls
  opened for their children (ids derived from the child's). They are the session's record of what
  it asked for and how that ended, so `export` carries them and `verify SESSION` checks them; the
  index entries that list them are not (an import writes its own, runtime/bundle.py);
- for a sub-agent taken on its own (`export CHILD`), its own task, which sits on its parent's board
  outside the tree: its events are the child's claim and how its work was settled, so they concern
  the child as much as its parent (the parent's board, and its index, stay out);
- the tree's shared notes (seed 004), kept on its top-level session's board (a fork's own board, which starts
  with the notes it inherited; its parent's stays out, as the parent does);
- the attachments the inputs and results of all those refer to (content-addressed, shared).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from chronicle.domain.ids import notes_board_id, task_id, tool_call_ids

from .agents.tree import session_tree
from .store import ChronicleStore
from .task_board import board_task_ids, sub_agent_task_id


@dataclass(frozen=True)
class Scope:
    #: The session and its sub-agents, depth-first in delegation order.
    sessions: list[UUID]
    #: Their aggregates: sessions, turns, tool calls, and their board's tasks (the ids of `tasks`).
    own: list[UUID]
    #: The turns (and their tool calls) the forks among them inherit, less any of `own`.
    inherited: list[UUID]
    #: The sessions those inherited turns were recorded in, oldest ancestor first.
    inherited_from: list[UUID]
    #: The DelegatedTask ids of their boards: posted ones (board index order), then auto-opened ones, then
    #: for a sub-agent root the task it works on (on its parent's board).
    #: An auto-opened id is derived, so it may name a task never opened (a child started before the
    #: task board existed): it has no events, and reading it finds none.
    tasks: list[UUID]


def session_scope(store: ChronicleStore, root_id: UUID) -> Scope:
    nodes = [node.session for node in session_tree(store, store.session(root_id))]
    own: list[UUID] = []
    for session in nodes:
        own += store.aggregate_ids_of(session)
    tasks: list[UUID] = []
    for session in nodes:
        tasks += board_task_ids(store, session.id)
    # A delegate call opens its child's task in the child's own creating transaction, so every
    # auto-opened task of the tree is that of one of its sub-agents: no turn or call is read to name them.
    tasks += [task_id(session.id) for session in nodes[1:]]
    # The root's own, if it is a sub-agent: on its parent's board, outside the tree, opened or claimed for it.
    root_task = sub_agent_task_id(store, nodes[0])
    if root_task is not None:
        tasks.append(root_task)
    tasks = list(dict.fromkeys(tasks))
    # The tree's shared notes (domain/notes.py) are its top-level session's: carried and checked with it. A board
    # never written has no events, and reading it finds none.
    notes = [notes_board_id(nodes[0].id)] if nodes[0].parent_session_id is None else []
    own = list(dict.fromkeys([*own, *tasks, *notes]))
    mine = set(own)
    inherited: list[UUID] = []
    origins: list[UUID] = []
    for session in nodes:
        if not session.forked_from:
            continue
        for turn in store.turns(list(store.first_head(session.id))):
            origins.append(turn.session_id)
            inherited += [turn.id, *tool_call_ids(turn.id, turn.steps)]
    return Scope(
        sessions=[s.id for s in nodes], own=own,
        inherited=[i for i in dict.fromkeys(inherited) if i not in mine],
        inherited_from=[s for s in dict.fromkeys(origins) if s not in mine], tasks=tasks,
    )


def attachment_ids(store: ChronicleStore, aggregate_ids: list[UUID]) -> list[UUID]:
    """Attachments the aggregates' events refer to (content blocks whose source names an attachment's sha256)."""
    from chronicle.domain.ids import attachment_id

    found: dict[UUID, None] = {}

    def walk_value(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("type") == "attachment" and isinstance(value.get("sha256"), str):
                found[attachment_id(value["sha256"])] = None
            for item in value.values():
                walk_value(item)
        elif isinstance(value, (list, tuple)):
            for item in value:
                walk_value(item)
        elif hasattr(value, "model_dump"):
            walk_value(value.model_dump())

    for _position, event in store.events_with_positions(aggregate_ids):
        walk_value(vars(event))
    return list(found)
