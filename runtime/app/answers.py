"""The answer to one recorded input, found in the log: what a caller whose prompt was queued waits for.

A second `run(agent, prompt, session=sid)` while a turn runs records its prompt and returns at once
(`queued`): the running call, or a worker, answers it later. A chat backend serving several users of
one session needs that answer for that caller. The input's turn names it (`Turn.input_id`), so the
answer is read from the turns, whichever process ran it. While the input waits, it is waited for (a worker
may take the session at its next look), except behind a turn that waits for an approval and no live
process holds: that stands until a person decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from uuid import UUID

from ..leases import held_by_a_live_process
from ..store import ChronicleStore
from ..turn_outcome import TurnOutcome
from .errors import AppError


@dataclass(frozen=True)
class Waiting:
    """The input has not been answered yet; `stalled` says why no one will answer it without a `resume`, else None."""

    stalled: str | None


class AnswerFinder:
    """Looks for the turn that answers `input_id`, reading each turn of the session once (others' turns are skipped)."""

    def __init__(self, store: ChronicleStore, session_id: UUID, input_id: str) -> None:
        self.store, self.session_id, self.input_id = store, session_id, input_id
        self._others: set[UUID] = set()

    def look(self) -> TurnOutcome | Waiting:
        """The answer's outcome once its turn ended or waits for an approval; Waiting while it is queued or running."""
        session = self.store.session(self.session_id)
        for turn_id in reversed(session.turns):
            if turn_id in self._others:
                continue
            turn = self.store.turn(turn_id)
            if turn.input_id != self.input_id:
                if turn.finished:
                    self._others.add(turn_id)
                continue
            if turn.finished or turn.status == "awaiting_approval":
                return TurnOutcome(session.id, turn.id, turn.status, text=turn.final_text or "", reason=turn.reason,
                                   input_id=turn.input_id)
            return Waiting(None)  # its turn is running
        if not any(item["input_id"] == self.input_id for item in session.queue):
            raise AppError(f"session {self.session_id} has no input {self.input_id!r} (a result's input_id names one)", 2)
        if session.active_turn_id is not None and not held_by_a_live_process(self.store, self.session_id):
            ahead = self.store.turn(session.active_turn_id)
            if ahead.status == "awaiting_approval":  # no worker moves it: a person decides, then a resume runs on
                return Waiting(f"input {self.input_id} waits behind turn {ahead.number} of session {self.session_id}, which "
                               "waits for an approval: approve or deny it, then resume(session) runs both")
        return Waiting(None)  # queued: the call or worker holding the session, or the next worker to look, runs it
