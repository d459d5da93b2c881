"""Starting sessions and recording inputs: an input is durable before it is acknowledged."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.session import Session

from .clock import SYSTEM_CLOCK, Clock
from .secret_scan import scanner_for
from .store import ChronicleStore


def queue_scanned(session: Session, input_id: str, text: str, now: Any, kind: str = "prompt",
                  attachments: list[dict[str, Any]] | None = None) -> None:
    """Queue an input with its secrets cut out first (runtime/secret_scan.py), and say how many."""
    found = scanner_for(session.spec.workspace).text(text)
    session.queue_input(input_id, found.value, now, kind=kind, attachments=attachments)
    session.note_redactions(f"input {input_id}", found.counts, now)


def start_session(store: ChronicleStore, spec: AgentSpec, first_input: str | None = None, clock: Clock = SYSTEM_CLOCK,
                  session_id: UUID | None = None, attachments: list[dict[str, Any]] | None = None) -> tuple[Session, str | None]:
    """`attachments`: reference blocks from runtime.attachments.store_attachments, recorded with the first input."""
    now = clock.now()
    session = Session.start(session_id or uuid4(), spec, now)
    input_id = None
    if first_input is not None:
        input_id = uuid4().hex
        queue_scanned(session, input_id, first_input, now, attachments=attachments)
    store.create_session(session)
    return session, input_id


def submit_input(store: ChronicleStore, session_id: UUID, text: str, clock: Clock = SYSTEM_CLOCK, kind: str = "prompt",
                 attachments: list[dict[str, Any]] | None = None) -> str:
    input_id = uuid4().hex
    now = clock.now()
    store.update_session(session_id, lambda session: queue_scanned(session, input_id, text, now, kind=kind, attachments=attachments))
    return input_id
