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
                  attachments: list[dict[str, Any]] | None = None, origin: dict[str, Any] | None = None) -> None:
    """Queue an input with its secrets cut out first (runtime/secret_scan.py), and say how many.

    An origin's senders go through the same scan: a phone number or an email is kept as given
    (the scan leaves them alone), while a sender that is a credential (a webhook that puts a token
    where the sender goes) is recorded as its marker, never in the clear."""
    scanner = scanner_for(session.spec.workspace)
    found = scanner.text(text)
    counts = dict(found.counts)
    if origin is not None:
        senders = []
        for sender in origin["senders"]:
            scanned = scanner.text(sender)
            senders.append(scanned.value)
            for kind_found, n in scanned.counts.items():
                counts[kind_found] = counts.get(kind_found, 0) + n
        origin = {**origin, "senders": senders}
    session.queue_input(input_id, found.value, now, kind=kind, attachments=attachments, origin=origin)
    session.note_redactions(f"input {input_id}", counts, now)


def start_session(store: ChronicleStore, spec: AgentSpec, first_input: str | None = None, clock: Clock = SYSTEM_CLOCK,
                  session_id: UUID | None = None, attachments: list[dict[str, Any]] | None = None,
                  origin: dict[str, Any] | None = None) -> tuple[Session, str | None]:
    """`attachments`: reference blocks from runtime.attachments.store_attachments, recorded with the first input."""
    now = clock.now()
    session = Session.start(session_id or uuid4(), spec, now)
    input_id = None
    if first_input is not None:
        input_id = uuid4().hex
        queue_scanned(session, input_id, first_input, now, attachments=attachments, origin=origin)
    store.create_session(session)
    return session, input_id


def submit_input(store: ChronicleStore, session_id: UUID, text: str, clock: Clock = SYSTEM_CLOCK, kind: str = "prompt",
                 attachments: list[dict[str, Any]] | None = None, origin: dict[str, Any] | None = None) -> str:
    """`origin`: {"channel", "senders"} of an input a channel queued (runtime/server/channels.py)."""
    input_id = uuid4().hex
    now = clock.now()
    store.update_session(session_id, lambda session: queue_scanned(session, input_id, text, now, kind=kind, attachments=attachments,
                                                                   origin=origin))
    return input_id
