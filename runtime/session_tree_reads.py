"""Reading a session's tree from the store: its turns, their tool calls, the children it delegated to.

Ids are derived (domain/ids.py: a call's from its turn, step and tool_use id, a child session's from
its call), so the tree is walked from the turns alone, without reading each call to learn its id.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable, Iterator
from uuid import UUID

from chronicle.domain.ids import child_session_id, tool_call_ids
from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn

from .aggregate_batch import load_turns


def delegated_ids(call: ToolCall) -> list[UUID]:
    """The child session id of each task a `delegate` call asked for, in task order (none for any other call); derived
    from the call, so a child that was never started is named too."""
    if call.name != "delegate":
        return []
    return [child_session_id(call.id, index) for index in range(len(call.input.get("tasks") or []))]


class SessionTreeReads:
    """What ChronicleStore reads of a session's tree (it inherits these, and gives `turn` and `find_tool_call`)."""

    if TYPE_CHECKING:
        def turn(self, turn_id: UUID, version: int | None = None) -> Turn: ...
        def find_tool_call(self, call_id: UUID) -> ToolCall | None: ...

    def head_turns(self, session: Session) -> list[Turn]:
        return self.turns(session.head)

    def turns(self, turn_ids: Iterable[UUID]) -> list[Turn]:
        """Many turns as they are now, read together (runtime/aggregate_batch.py), in the order given."""
        ids = list(turn_ids)
        found = load_turns(self, ids)
        return [found[t] for t in ids]

    def tool_calls_of(self, turn: Turn) -> list[ToolCall]:
        """The turn's calls, a completed one with its output as the turn stores it (ToolCall.Completed
        v3 has none of its own), so each reads as it did when it ran."""
        calls = []
        for call_id in tool_call_ids(turn.id, turn.steps):
            call = self.find_tool_call(call_id)
            if call is not None:
                if call.status == "completed" and call.output is None:
                    call.output = turn.output_for(call.step, call.tool_use_id)
                calls.append(call)
        return calls

    def delegated_session_ids(self, session: Session) -> Iterator[UUID]:
        """The child session id of every task the session's `delegate` calls asked for, in order
        (ids are derived from the call, so a child that was never started is named too)."""
        for tid in session.turns:
            for call in self.tool_calls_of(self.turn(tid)):
                yield from delegated_ids(call)

    def aggregate_ids_of(self, session: Session) -> list[UUID]:
        """The session's id, its turns' and their tool calls', for reading their events together.

        A call's id is derived from its turn, step and tool_use id, so the turns are read (all
        in one batch) and no call is: reading each one to learn an id it was named by was a
        query and a replay per call and per turn (`log` of a 100-turn session on PostgreSQL:
        200 round trips). A call the turn asked for but never created has no events to find."""
        ids: list[UUID] = [session.id]
        for turn in self.turns(session.turns):
            ids.append(turn.id)
            ids.extend(tool_call_ids(turn.id, turn.steps))
        return ids
