"""Sessions written through the domain rather than run by the loop: a store of tens of thousands of events in a
second, with the shape the bench's stores have (turns of tool steps, no ToolCall aggregates). For tests whose
subject is what reads such a store (rebuilds, long commands), not how the loop writes it."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.content import ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock
from chronicle.domain.ids import turn_id
from chronicle.domain.session import Session
from chronicle.domain.turn import Turn


def lookup_session(workspace: Path, now: datetime) -> Session:
    from uuid import uuid4

    return Session.start(uuid4(), AgentSpec(name="main", provider="bench", model="m", tools=("lookup",), workspace=str(workspace)), now)


def tool_turn(session: Session, number: int, steps: int, now: datetime, step_s: float = 0) -> Turn:
    """Turn `number` of `session`, started, `steps` lookups (`step_s` apart) and a final answer, ended on both."""
    session.queue_input(f"in{number}", "look things up", now)
    tid = turn_id(session.id, f"in{number}")
    session.start_turn(tid, now)
    turn = Turn(id=tid, session_id=session.id, input_id=f"in{number}", number=number, input_text="look things up",
                agent="main", timestamp=now)
    turn.start(now)
    for k in range(steps):
        now += timedelta(seconds=step_s)
        use = ToolUseBlock(id=f"toolu_{number}_{k}", name="lookup", input={"key": k})
        turn.record_response(ModelResponse(content=[TextBlock(text="Looking."), use], stop_reason="tool_use"), now)
        turn.record_tool_results([ToolResultBlock(tool_use_id=use.id, content=f"value {k}")], now)
    turn.record_response(ModelResponse(content=[TextBlock(text="Done.")], stop_reason="end_turn"), now)
    turn.complete(now)
    session.end_turn(tid, now)
    return turn
