"""A continued session's own tools, by import path, against what those paths hold now.

A session records the user's tools as import paths (`shop:TOOLS`), and each process loads them
again: the module may since hold fewer. A tool the history called and that is gone refuses the
session: the model would see its calls but could not make another, with nothing recorded to say
why.

The sub-agent sessions that a continued session's turn in flight goes on with (its delegate
call re-run after a crash continues the children it had started) are checked the same way, each
with its own recorded tools; a child resumed on its own is a session continued like any other.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

from chronicle.domain.ids import child_session_id, tool_call_id
from chronicle.domain.session import Session

from ..agents.children import find_session
from ..store import ChronicleStore
from ..tools.base import Toolbox
from ..tools.imports import is_import_path
from ..toolsets import agent_toolbox


class VanishedTool(ValueError):
    """A tool the history called is gone; app/loops.py raises it as the loop's setup error (exit 2)."""


def checked_tools(store: ChronicleStore, session: Session, toolbox: Toolbox, workspace: Path) -> list[str]:
    """VanishedTool for a tool the session's history, or that of a sub-agent session it goes on with, called and
    its import path no longer holds; the notes to say (none yet). `toolbox`: the session's own, as built now."""
    notes = vanished(store, session, toolbox)
    for child in continuing_children(store, session):
        notes += vanished(store, child, agent_toolbox(child.spec, workspace))
    return notes


def vanished(store: ChronicleStore, session: Session, toolbox: Toolbox) -> list[str]:
    paths = [entry for entry in session.spec.tools if is_import_path(entry)]
    if not paths:
        return []
    called = sorted(called_tool_names(store, session) - set(toolbox.tools))
    if called:
        names = ", ".join(map(repr, called))
        raise VanishedTool(
            f"session {session.id}{sub_agent(session)}: its history called {names}, which {', '.join(paths)} no longer "
            "holds; put it back there to continue this session, or start a new session to work with the tools as they are now")
    return []


def sub_agent(session: Session) -> str:
    return "" if session.parent_session_id is None else f" (sub-agent {session.spec.name} of session {session.parent_session_id})"


def called_tool_names(store: ChronicleStore, session: Session) -> set[str]:
    """The tools the session's active history called that were there to run (not answered "unknown tool"); its
    turns read together (`store.turns`: two queries per few hundred turns, not one or two per turn)."""
    called: set[str] = set()
    for turn in store.turns(session.head):
        for step in turn.steps:
            unknown = {r.get("tool_use_id") for r in step.get("results") or []
                       if isinstance(r.get("content"), str) and r["content"].startswith("unknown tool")}
            called |= {b["name"] for b in step["response"].get("content", [])
                       if b.get("type") == "tool_use" and b.get("id") not in unknown}
    return called


def continuing_children(store: ChronicleStore, session: Session) -> Iterator[Session]:
    """The sub-agent sessions, at any depth, that continuing `session` goes on with: those of a delegate call of its
    turn in flight that has no result yet, themselves with a turn in flight. Nothing is read when the session has
    no turn in flight or no sub-agent of its registry has tools by import path (the only ones that can vanish)."""
    if session.active_turn_id is None or not any(is_import_path(t) for agent in session.spec.registry for t in agent.tools):
        return
    turn = store.turn(session.active_turn_id)
    for step in turn.steps:
        answered = {r.get("tool_use_id") for r in step.get("results") or []}
        for block in step["response"].get("content", []):
            if block.get("type") != "tool_use" or block.get("name") != "delegate" or block.get("id") in answered:
                continue
            call_id = tool_call_id(turn.id, step["step"], block["id"])
            tasks = (block.get("input") or {}).get("tasks")
            for index in range(len(tasks) if isinstance(tasks, list) else 0):
                child = find_session(store, child_session_id(call_id, index))
                if child is not None and child.active_turn_id is not None:
                    yield child
                    yield from continuing_children(store, child)
