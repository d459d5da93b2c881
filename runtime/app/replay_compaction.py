"""Replay's compactor: the compactions the recording made are recorded again where it made them.

A replay re-asks exactly what was recorded, so it makes no summary call and decides nothing. A
compaction of a turn's own steps (`Turn.IterationsCompacted`) is recorded again on the scratch turn
when it has as many steps as the recorded turn had then (`steps_recorded`). A compaction of whole
turns (`Session.Compacted`) is placed by its log position: before the turn that started next, or,
if a turn was in flight (compacted from inside it, or on "prompt too long"), before that turn's
next model call, after as many of its steps as had been recorded by then. Either way the next
request is built from the same events as the live loop built it from.
"""

from __future__ import annotations

import bisect
from typing import Any
from uuid import UUID

from chronicle.domain.context import first_sent_step
from chronicle.domain.errors import DomainError
from chronicle.domain.ids import turn_id as make_turn_id
from chronicle.domain.session import Session
from chronicle.domain.turn import Turn

from ..compaction import Compactor
from ..loop_io import LoopIO
from ..store import ChronicleStore

#: Where a recorded `Session.Compacted` goes: ("before", turn id) or ("inside", turn id, steps recorded).
Place = tuple[Any, ...]


class RecordedCompactions(Compactor):
    def __init__(self, store: ChronicleStore, session: Session, recorded_turns: list[Turn]) -> None:
        super().__init__()
        #: The branch's recorded turns, by their place on it (the scratch turn's number).
        self.recorded_turns = recorded_turns
        self.session_compactions = session_compactions(store, session)

    async def maybe_compact(self, io: LoopIO, session: Any) -> None:
        item = session.next_input
        if item is not None:
            self._compact_session(io, session.id, ("before", make_turn_id(session.id, item["input_id"])))
        return None

    async def between_iterations(self, io: LoopIO, session: Any, turn: Turn, context: Any) -> bool:
        changed = self._compact_session(io, session.id, ("inside", turn.id, len(turn.steps)))
        if not 0 < turn.number <= len(self.recorded_turns):
            return changed
        compacted = False
        for entry in self.recorded_turns[turn.number - 1].iteration_compactions:
            if entry["steps_recorded"] == len(turn.steps) and entry["through_step"] > first_sent_step(turn):
                turn.compact_iterations(entry["through_step"], entry["summary"], entry["strategy"], io.clock.now())
                compacted = True
        if compacted:
            io.save(turn)
        return changed or compacted

    async def for_retry(self, io: LoopIO, session_id: UUID, turn: Turn) -> bool:
        return False  # a recorded response is never "prompt too long": that attempt was retried, not recorded

    def _compact_session(self, io: LoopIO, session_id: UUID, place: Place) -> bool:
        changed = False
        for event in self.session_compactions.pop(place, []):
            try:
                io.store.update_session(session_id, compaction_of(event, io.clock.now()))
            except DomainError:
                continue  # the branch replayed is not the one it compacted (an undo since): the requests will say so
            changed = True
        return changed


def compaction_of(event: Any, now: Any) -> Any:
    """What a recorded `Session.Compacted` did, to do again to the replay's session."""

    def compact(session: Session) -> None:
        session.compact(list(event.turn_ids), event.summary, event.strategy, now)

    return compact


def session_compactions(store: ChronicleStore, session: Session) -> dict[Place, list[Any]]:
    """The session's `Session.Compacted` events by where they were made (see `Place`)."""
    compactions = list(store.events_with_positions([session.id], topic_suffix=".Compacted"))
    if not compactions:
        return {}
    started = [(p, e.turn_id) for p, e in store.events_with_positions([session.id], topic_suffix=".TurnStarted")]
    ended = {e.turn_id: p for p, e in store.events_with_positions([session.id], topic_suffix=".TurnEnded")}
    starts = [p for p, _ in started]
    placed: dict[Place, list[Any]] = {}
    responses: dict[UUID, list[int]] = {}
    for position, event in compactions:
        index = bisect.bisect_left(starts, position)
        running = started[index - 1][1] if index else None
        if running is not None and ended.get(running, position + 1) > position:
            if running not in responses:
                responses[running] = [p for p, _ in store.events_with_positions([running], topic_suffix=".ModelResponded")]
            place: Place = ("inside", running, bisect.bisect_left(responses[running], position))
        elif index < len(started):
            place = ("before", started[index][1])
        else:
            continue  # after the last turn: no request of the recording read it
        placed.setdefault(place, []).append(event)
    return placed
