"""Replay's compactor: the compactions of a turn's own steps are recorded again where the recording made them.

A replay re-asks exactly what was recorded, so it makes no summary call and decides nothing: when
the replayed turn has as many steps as the recorded one had when its steps were compacted
(`Turn.IterationsCompacted.steps_recorded`), the same compaction is recorded on the scratch turn,
and the next request is built from it as the live loop built it. Compactions of whole turns
(`Session.Compacted`) are not replayed: the replay asks what was asked before them.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from chronicle.domain.context import first_sent_step
from chronicle.domain.turn import Turn

from ..compaction import Compactor
from ..loop_io import LoopIO


class RecordedStepCompactions(Compactor):
    def __init__(self, recorded_turns: list[Turn]) -> None:
        super().__init__()
        #: The branch's recorded turns, by their place on it (the scratch turn's number).
        self.recorded_turns = recorded_turns

    async def maybe_compact(self, io: LoopIO, session: Any) -> None:
        return None  # never compacts whole turns

    async def between_iterations(self, io: LoopIO, session: Any, turn: Turn, context: Any) -> bool:
        if not 0 < turn.number <= len(self.recorded_turns):
            return False
        changed = False
        for entry in self.recorded_turns[turn.number - 1].iteration_compactions:
            if entry["steps_recorded"] == len(turn.steps) and entry["through_step"] > first_sent_step(turn):
                turn.compact_iterations(entry["through_step"], entry["summary"], entry["strategy"], io.clock.now())
                changed = True
        if changed:
            io.save(turn)
        return changed

    async def for_retry(self, io: LoopIO, session_id: UUID, turn: Turn) -> bool:
        return False  # a recorded response is never "prompt too long": that attempt was retried, not recorded
