"""What a call that runs turns returns: `RunResult`, and `Answered` for each turn it ran.

Apart from `Chronicle` (chronicle/client.py) so that the facade holds the use cases and this module
the one rule they share: which turn's outcome is the answer to the caller's own prompt.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence
from uuid import UUID

from chronicle.runtime.app.running import Driven, answered_input
from chronicle.runtime.loop import TurnOutcome
from chronicle.runtime.store import ChronicleStore


@dataclass(frozen=True)
class Answered:
    """One turn a call ran: the input it answered (`input_id`, as `submit` and `steer` return it) and how it ended."""

    input_id: str | None
    turn_id: str | None
    status: str
    text: str
    reason: str | None = None

    @classmethod
    def of(cls, store: ChronicleStore, outcome: TurnOutcome) -> "Answered":
        return cls(answered_input(store, outcome), str(outcome.turn_id) if outcome.turn_id else None, outcome.status, outcome.text, outcome.reason)


@dataclass(frozen=True)
class RunResult:
    """How a run ended: status completed | failed | awaiting_approval | stopped | cancelled (or queued, idle, busy), and
    the exit code `chronicle run` would give for it.

    A run records its prompt and then runs the session's queued inputs in order, one turn each, as long as each
    completes (as `chronicle run` does): inputs steered or submitted before it run first, and inputs another `run`
    queued while it works run after it. `status`, `text`, `reason`, `turn_id` and `exit_code` are the answer to this
    call's own prompt when its turn ran (not that of an input queued after it); `answered` lists every turn the call
    ran, in order. When its prompt did not run — a turn before it did not complete (failed, awaiting approval, …),
    or another process holds the session (status `queued`) — they say how the last turn that ran ended and
    `input_queued` is True: the prompt waits in the session's queue for `resume` (or that process)."""

    session_id: str
    status: str
    text: str
    exit_code: int
    reason: str | None = None
    turn_id: str | None = None
    #: What `chronicle run` (or `resume`) prints as notes: an Agent's tools ignored by a continued session, a tool its
    #: import path no longer holds, CHRONICLE_THINKING_TOKENS for a provider that takes none (each also a ChronicleWarning),
    #: a model change recorded, the first failure of `run(on_event=)`'s callback (also a ChronicleWarning).
    notes: tuple[str, ...] = ()
    #: The input this call recorded (its prompt); None for `resume`, which records none.
    input_id: str | None = None
    #: Every turn this call ran, in order, each with the input it answered.
    answered: tuple[Answered, ...] = ()
    #: This call's prompt has not run yet: it is still queued.
    input_queued: bool = False

    @classmethod
    def of(cls, session_id: UUID, outcome: TurnOutcome | None, status: str = "idle", reason: str | None = None,
           notes: Sequence[str] = ()) -> "RunResult":
        if outcome is None:
            return cls(str(session_id), status, "", 0 if status in ("idle", "queued") else 1, reason, notes=tuple(notes))
        return cls(str(session_id), outcome.status, outcome.text, outcome.exit_code, outcome.reason,
                   str(outcome.turn_id) if outcome.turn_id else None, tuple(notes))

    @classmethod
    def of_run(cls, store: ChronicleStore, session_id: UUID, driven: Driven, input_id: str | None,
               notes: Sequence[str] = ()) -> "RunResult":
        """The result of a call that recorded `input_id` and drove the session (see the class's docstring)."""
        answered = tuple(Answered.of(store, outcome) for outcome in driven.outcomes)
        if driven.queued is not None:
            base = cls.of(session_id, None, "queued", driven.queued.reason, notes)
        else:
            mine = next((o for o, a in zip(driven.outcomes, answered, strict=True) if input_id is not None and a.input_id == input_id), None)
            base = cls.of(session_id, mine or driven.outcome, notes=notes)
        waiting = input_id is not None and all(a.input_id != input_id for a in answered)
        return replace(base, input_id=input_id, answered=answered, input_queued=waiting)
