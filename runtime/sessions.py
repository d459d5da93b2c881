"""Starting sessions and recording inputs: an input is durable before it is acknowledged."""

from __future__ import annotations

from typing import Callable, TypeVar
from uuid import UUID, uuid4

from eventsourcing.persistence import IntegrityError

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.session import Session

from .clock import SYSTEM_CLOCK, Clock
from .store import ChronicleStore

T = TypeVar("T")


def start_session(store: ChronicleStore, spec: AgentSpec, first_input: str | None = None, clock: Clock = SYSTEM_CLOCK,
                  session_id: UUID | None = None) -> tuple[Session, str | None]:
    now = clock.now()
    session = Session.start(session_id or uuid4(), spec, now)
    input_id = None
    if first_input is not None:
        input_id = uuid4().hex
        session.queue_input(input_id, first_input, now)
    store.create_session(session)
    return session, input_id


def update_session(store: ChronicleStore, session_id: UUID, change: Callable[[Session], T], attempts: int = 50) -> T:
    """Apply a session-only command on a fresh copy and save it, again on a version conflict.

    Several writers touch one session (a worker ending a turn, a client submitting an input, a
    person approving); optimistic concurrency turns a race into a retry instead of a lost write.
    """
    for _ in range(attempts):
        session = store.session(session_id)
        result = change(session)
        try:
            store.save(session)
            return result
        except IntegrityError:
            continue
    raise IntegrityError(f"session {session_id}: {attempts} conflicting writes in a row; try again")


def submit_input(store: ChronicleStore, session_id: UUID, text: str, clock: Clock = SYSTEM_CLOCK, kind: str = "prompt") -> str:
    input_id = uuid4().hex
    update_session(store, session_id, lambda s: s.queue_input(input_id, text, clock.now(), kind=kind))
    return input_id
