"""A continued session's own tools, by import path, against what those paths hold now.

A session records the user's tools as import paths (`shop:TOOLS`), and each process loads them
again: the module may since hold fewer. A tool the history called and that is gone refuses the
session (the model would see its calls but could not make another, with nothing recorded to say
why); one it had but never called is said in a note, since the history does not need it.

Since specs record the names each path held (`AgentSpec.import_tools`), nothing gone costs no
read: only when a recorded name is missing now are the history's turns read, together, to tell
a called tool from a never-called one. A spec recorded before that has no names to compare, so
its turns are read whenever it has import paths, and only a called tool can be found missing.

A single path (`shop:refund`) whose tool was deleted or renamed since no longer loads at all (`ToolGone`): the
loop is built without it, and it is checked here like a list that lost that tool, for the main agent and for
each sub-agent (a definition the session may still start, a sub-agent session it goes on with).

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
from ..tools.imports import ToolGone, ToolLoadError, is_import_path, load_tools
from ..toolsets import agent_toolbox, toolbox_for


class VanishedTool(ValueError):
    """A tool the history called is gone; app/loops.py raises it as the loop's setup error (exit 2)."""


def checked_tools(store: ChronicleStore, session: Session, toolbox: Toolbox, workspace: Path) -> list[str]:
    """The notes for tools the session, or a sub-agent session it goes on with, had and no longer has and never
    called; VanishedTool for one its history called. `toolbox`: the session's own, as built now."""
    notes = vanished(store, session, toolbox, workspace) + shrunk_definitions(session, workspace)
    for child in continuing_children(store, session):
        notes += vanished(store, child, agent_toolbox(child.spec, workspace, []), workspace)
    return notes


def gone_paths(paths: list[str] | tuple[str, ...], workspace: Path) -> dict[str, str]:
    """The import paths whose module no longer has their attribute (a tool deleted or renamed), with what is missing.
    Another load failure is not one: building the loop refused it already, or will, saying why."""
    gone = {}
    for path in paths:
        if not is_import_path(path):
            continue
        try:
            load_tools(path, workspace)
        except ToolGone as exc:
            gone[path] = exc.why
        except ToolLoadError:
            pass
    return gone


def shrunk_definitions(session: Session, workspace: Path) -> list[str]:
    """Notes for the sub-agents this session may still start whose import paths hold fewer tools than when it
    started: a new sub-agent session has no history to need them, so it starts without them, said."""
    notes = []
    for definition in session.spec.registry:
        missing = gone_paths(definition.tools, workspace)
        if not definition.import_tools and not missing:
            continue
        held = set(toolbox_for(definition.tools, workspace, []).tools)  # loads, or loop_parts refused the session already
        for path in [p for p in definition.tools if is_import_path(p)]:
            names = definition.import_tools.get(path)
            lost = [n for n in names if n not in held] if names is not None else []
            if path in missing:
                what = f", which held {', '.join(map(repr, lost))} when the session started" if lost else ""
                notes.append(f"note: session {session.id}: {path} of sub-agent {definition.name} no longer loads "
                             f"({missing[path]}){what}; the sub-agents it starts now go without it")
            elif lost:
                notes.append(f"note: session {session.id}: {path} of sub-agent {definition.name} no longer holds "
                             f"{', '.join(map(repr, lost))}, which it held when the session started; the sub-agents "
                             "it starts now go without it")
    return notes


def vanished(store: ChronicleStore, session: Session, toolbox: Toolbox, workspace: Path) -> list[str]:
    paths = [entry for entry in session.spec.tools if is_import_path(entry)]
    if not paths:
        return []
    have = set(toolbox.tools)
    missing = gone_paths(paths, workspace)  # a single path whose tool was deleted or renamed: left out of `toolbox`
    recorded = session.spec.import_tools
    if recorded:
        lost = {path: [n for n in names if n not in have] for path, names in recorded.items()}
        lost = {path: names for path, names in lost.items() if names}
        if not lost and not missing:
            return []  # every tool the session started with is there: its history need not be read
        gone = {name for names in lost.values() for name in names}
        called = sorted(called_tool_names(store, session) & gone)
        where = [path for path, names in lost.items() if set(names) & set(called)]
    else:
        lost = {}
        called = sorted(called_tool_names(store, session) - have)
        where = paths
    if called:
        names = ", ".join(map(repr, called))
        why = "; ".join(missing[path] for path in where if path in missing)
        raise VanishedTool(
            f"session {session.id}{agent_of(session)}: its history called {names}, which {', '.join(where)} no longer holds"
            f"{f' ({why})' if why else ''}; put it back there to continue this session, or start a new session to work "
            "with the tools as they are now")
    notes = []
    for path in dict.fromkeys([*lost, *missing]):
        if path in missing:
            what = f"; it held {', '.join(map(repr, lost[path]))} when the session started" if lost.get(path) else ""
            notes.append(f"note: session {session.id}{sub_agent(session)}: {path} no longer loads ({missing[path]}){what}; "
                         "the session goes on without it (its history never called it)")
        else:
            notes.append(f"note: session {session.id}{sub_agent(session)}: {path} no longer holds "
                         f"{', '.join(map(repr, lost[path]))}, which it held when the session started; the session goes on "
                         "without it (its history never called it)")
    return notes


def sub_agent(session: Session) -> str:
    return "" if session.parent_session_id is None else f" (sub-agent {session.spec.name} of session {session.parent_session_id})"


def agent_of(session: Session) -> str:
    """Which agent a refusal is about: the top-level one by its name, a sub-agent with the session that started it."""
    return sub_agent(session) or f" (agent {session.spec.name})"


def called_tool_names(store: ChronicleStore, session: Session) -> set[str]:
    """The tools the session's active history called that were there to run (not answered "unknown tool"); its
    turns read together (`store.turns`: two queries per few hundred turns, not two per turn)."""
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
