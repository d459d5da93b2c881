"""Replay's compactor: the compactions the recording made are recorded again where it made them.

A replay re-asks exactly what was recorded, so it makes no summary call and decides nothing. A
compaction of a turn's own steps (`Turn.IterationsCompacted`) is recorded again on the scratch turn
when it has as many steps as the recorded turn had then (`steps_recorded`). A compaction of whole
turns (`Session.Compacted`) is placed by its log position: before the turn that started next, or,
if a turn was in flight (compacted from inside it, or on "prompt too long"), before that turn's
next model call, after as many of its steps as had been recorded by then. Either way the next
request is built from the same events as the live loop built it from.

Each turn on the branch is placed by the session that ran it: a fork's inherited turns by its parent's
log (or further up, for turns its parent inherited), so a compaction the parent made before or inside a
turn the fork inherited is made again there; the fork's own turns by its own log. Places are the turns'
places on the branch (the scratch session's turn numbers), and a compaction's turns are the branch's
first ones, so they are named by the scratch session's ids for them (its turns' ids derive from its own
id, not from the session that ran them). Only the branch's turns place a compaction: one made before a
turn undone since goes before the branch's next turn, which read it if its turns are still the branch's
first (as `holding_compaction` decides); one whose turns are not was read by no request of the branch,
so it is not made again. A compaction that was read and cannot be made again on the replayed branch is
reported as the replay's divergence (kind "compaction"), never skipped.
"""

from __future__ import annotations

import bisect
from typing import Any, Callable
from uuid import UUID

from chronicle.domain.context import first_sent_step
from chronicle.domain.errors import DomainError
from chronicle.domain.session import Session
from chronicle.domain.turn import Turn

from ..compaction import Compactor
from ..loop_io import LoopIO
from ..store import ChronicleStore, NotFound

#: Where a recorded `Session.Compacted` goes: ("before", N) or ("inside", N, steps recorded), N the turn's place on
#: the branch (from 1).
Place = tuple[Any, ...]
#: Told (turn's place on the branch, step, what happened) when a recorded compaction cannot be made again.
Unplaced = Callable[[int, int | None, str], None]


class RecordedCompactions(Compactor):
    def __init__(self, store: ChronicleStore, session: Session, recorded_turns: list[Turn],
                 unplaced: Unplaced | None = None) -> None:
        super().__init__()
        #: The branch's recorded turns, by their place on it (the scratch turn's number).
        self.recorded_turns = recorded_turns
        self.session_compactions = session_compactions(store, session, recorded_turns)
        self.unplaced = unplaced

    async def maybe_compact(self, io: LoopIO, session: Any) -> None:
        if session.next_input is not None:
            self._compact_session(io, session.id, ("before", len(session.turns) + 1))
        return None

    async def between_iterations(self, io: LoopIO, session: Any, turn: Turn, context: Any) -> bool:
        changed = self._compact_session(io, session.id, ("inside", turn.number, len(turn.steps)))
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
        for position, event in self.session_compactions.pop(place, []):
            if list(event.turn_ids) != [t.id for t in self.recorded_turns[: len(event.turn_ids)]]:
                continue  # its turns are not the branch's first (an undo since): no request of this branch read it
            try:
                io.store.update_session(session_id, compaction_of(event, io.clock.now()))
            except DomainError as exc:
                if self.unplaced is not None:
                    step = place[2] if place[0] == "inside" else None
                    self.unplaced(place[1], step, f"the recorded compaction of {len(event.turn_ids)} turn(s) at log position "
                                                  f"{position} cannot be made again on the replayed branch: {exc}")
                continue
            changed = True
        return changed


def compaction_of(event: Any, now: Any) -> Any:
    """What a recorded `Session.Compacted` did, to do again to the replay's session: the same number of the branch's
    first turns, named as the replay's session names them."""

    def compact(session: Session) -> None:
        session.compact(list(session.head[: len(event.turn_ids)]), event.summary, event.strategy, now)

    return compact


def session_compactions(store: ChronicleStore, session: Session, turns: list[Turn] | None = None) -> dict[Place, list[Any]]:
    """The `Session.Compacted` events read by the branch's turns (`turns`: the session's head turns), as (log position,
    event) by where they were made (see `Place`), from the log of each session that ran one of them."""
    turns = turns if turns is not None else store.head_turns(session)
    place_of = {t.id: n for n, t in enumerate(turns, 1)}
    owners = list(dict.fromkeys([*(t.session_id for t in turns), session.id]))
    placed: dict[Place, list[Any]] = {}
    for owner in owners:
        try:
            found = _placed_in(store, owner, place_of)
        except NotFound:
            continue  # a fork imported without its origin: what that session compacted is not in this store
        for (kind, turn_id, *steps), events in found.items():
            if turn_id in place_of:
                placed.setdefault((kind, place_of[turn_id], *steps), []).extend(events)
    for events in placed.values():
        events.sort(key=lambda found: found[0])
    return placed


def _placed_in(store: ChronicleStore, session_id: UUID, branch: dict[UUID, int]) -> dict[tuple[Any, ...], list[tuple[int, Any]]]:
    """One session's `Session.Compacted` events by the turn of the branch they were made before or inside (by its id)."""
    store.session(session_id, copy=False)  # NotFound when it is not in this store
    compactions = list(store.events_with_positions([session_id], topic_suffix=".Compacted"))
    if not compactions:
        return {}
    started = [(p, e.turn_id) for p, e in store.events_with_positions([session_id], topic_suffix=".TurnStarted")
               if e.turn_id in branch]
    ended = {e.turn_id: p for p, e in store.events_with_positions([session_id], topic_suffix=".TurnEnded")}
    starts = [p for p, _ in started]
    placed: dict[tuple[Any, ...], list[tuple[int, Any]]] = {}
    responses: dict[UUID, list[int]] = {}
    for position, event in compactions:
        index = bisect.bisect_left(starts, position)
        running = started[index - 1][1] if index else None
        if running is not None and ended.get(running, position + 1) > position:
            if running not in responses:
                responses[running] = [p for p, _ in store.events_with_positions([running], topic_suffix=".ModelResponded")]
            place: tuple[Any, ...] = ("inside", running, bisect.bisect_left(responses[running], position))
        elif index < len(started):
            place = ("before", started[index][1])
        else:
            continue  # after the session's last turn on the branch: no request of the branch read it
        placed.setdefault(place, []).append((position, event))
    return placed
