"""What the span derivation reads: one turn's stored events, its tool calls' events, and where it sits.

Both paths to a trace load through here — `chronicle export-traces` for a whole session tree,
and the live hook for the turn that just ended — so the derivation sees the same input either
way and the two cannot drift. Events are flattened to plain records (kind, time, fields) so
that derive.py stays a pure function of data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Iterator
from uuid import UUID

from chronicle.domain.ids import tool_call_id
from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn

from ..store import ChronicleStore, NotFound

SKIP_FIELDS = {"originator_id", "originator_version", "timestamp", "originator_topic"}


@dataclass(frozen=True)
class LogEvent:
    kind: str  # the stored event's class name: Created, ModelResponded, Approved, ...
    at: datetime
    data: dict[str, Any]


@dataclass
class TurnLog:
    """One turn as the log holds it, with the ids that place it in a trace."""

    session_id: UUID
    turn_id: UUID
    agent: str
    provider: str
    model: str
    instructions: str
    #: The turn at the top of the delegation chain: its id is the trace id of everything below it.
    root_turn_id: UUID
    #: The delegate tool call this session runs under, if it is a sub-agent.
    parent_tool_call_id: UUID | None
    events: list[LogEvent] = field(default_factory=list)
    #: Tool call id -> that call's events, in the order the model asked for them.
    tool_calls: dict[UUID, list[LogEvent]] = field(default_factory=dict)


def _flatten(event: Any) -> LogEvent:
    data = {k: v for k, v in event.__dict__.items() if k not in SKIP_FIELDS}
    return LogEvent(kind=type(event).__name__, at=event.timestamp, data=data)


def root_turn_of(store: ChronicleStore, session: Session, turn_id: UUID) -> UUID:
    """Follow parent tool calls up to the top-level turn (a few aggregate reads per level)."""
    seen = 0
    while session.parent_tool_call_id is not None and seen < 64:
        try:
            call = store.tool_call(session.parent_tool_call_id)
            session = store.session(call.session_id)
        except NotFound:
            break
        turn_id = call.turn_id
        seen += 1
    return turn_id


def turn_log(store: ChronicleStore, turn: Turn, session: Session | None = None) -> TurnLog:
    session = session or store.session(turn.session_id)
    spec = session.spec_for(turn.id)  # the model in effect for this turn: a later ModelChanged applies to later turns only
    uses = {tool_call_id(turn.id, step["step"], block["id"]): (step["step"], block["id"])
            for step in turn.steps for block in step["response"].get("content", []) if block.get("type") == "tool_use"}
    call_ids = list(uses)
    log = TurnLog(
        session_id=session.id,
        turn_id=turn.id,
        agent=spec.name,
        provider=spec.provider,
        model=spec.model,
        instructions=spec.instructions,
        root_turn_id=root_turn_of(store, session, turn.id),
        parent_tool_call_id=session.parent_tool_call_id,
        tool_calls={cid: [] for cid in call_ids},
    )
    for _, event in store.events_with_positions([turn.id, *call_ids]):
        flat = _flatten(event)
        if event.originator_id == turn.id:
            if isinstance(event, Turn.ToolResultsRecorded):  # references to kept results, resolved
                flat.data["blocks"] = turn.steps[event.step]["results"]
            log.events.append(flat)
        else:
            if isinstance(event, ToolCall.Completed) and event.output is None:  # stored once, by the turn
                flat.data["output"] = turn.output_for(*uses[event.originator_id])
            log.tool_calls[event.originator_id].append(flat)
    log.tool_calls = {cid: events for cid, events in log.tool_calls.items() if events}
    return log


def session_logs(store: ChronicleStore, session: Session, with_children: bool = True) -> Iterator[TurnLog]:
    """Every turn of the session (and, depth-first, of its sub-agents), oldest first."""
    from ..agents.tree import session_tree

    sessions = [node.session for node in session_tree(store, session)] if with_children else [session]
    for each in sessions:
        for tid in each.turns:
            yield turn_log(store, store.turn(tid), each)
