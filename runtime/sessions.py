"""Starting sessions and recording inputs: an input is durable before it is acknowledged."""

from __future__ import annotations

from typing import Any
from uuid import UUID, uuid4

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.session import Session

from .clock import SYSTEM_CLOCK, Clock
from .pending import Pending
from .reply_index import wants_reply, with_entry
from .secret_scan import scanner_for
from .store import ChronicleStore


def queue_scanned(session: Session, input_id: str, text: str, now: Any, kind: str = "prompt",
                  attachments: list[dict[str, Any]] | None = None, origin: dict[str, Any] | None = None) -> None:
    """Queue an input with its secrets cut out first (runtime/secret_scan.py), and say how many.

    An origin's senders go through the same scan: a phone number or an email is kept as given
    (the scan leaves them alone), while a sender that is a credential (a webhook that puts a token
    where the sender goes) is recorded as its marker, never in the clear.

    In auth mode (a tool awaits a credential, seed 001) the text is that credential: it goes to the credential
    store before anything else, and neither an input, a turn nor the text is recorded (runtime/credentials.py)."""
    from .credentials import take_credential

    if take_credential(session, text, now):
        return
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


def tool_names_now(spec: AgentSpec) -> AgentSpec:
    """toolsets.as_started, imported only for a spec with an import path: the tools package is heavy to import."""
    if not any(":" in tool for agent in (spec, *spec.registry) for tool in agent.tools):
        return spec
    from .toolsets import as_started

    return as_started(spec)


def start_session(store: ChronicleStore, spec: AgentSpec, first_input: str | None = None, clock: Clock = SYSTEM_CLOCK,
                  session_id: UUID | None = None, attachments: list[dict[str, Any]] | None = None,
                  origin: dict[str, Any] | None = None) -> tuple[Session, str | None]:
    """`attachments`: reference blocks from runtime.attachments.store_attachments, recorded with the first input.
    A first input that wants a channel's reply is indexed in the same transaction (runtime/reply_index.py).
    The spec is recorded with the names its import paths hold now (toolsets.as_started): a path that does not
    load is a ToolLoadError (a ValueError), nothing recorded."""
    spec = tool_names_now(spec)
    now = clock.now()
    sid = session_id or uuid4()
    input_id = uuid4().hex if first_input is not None else None

    def build() -> Session:
        session = Session.start(sid, spec, now)
        if first_input is not None and input_id is not None:
            queue_scanned(session, input_id, first_input, now, attachments=attachments, origin=origin)
        return session

    if input_id is None or not wants_reply(origin):
        session = build()
        store.create_session(session)
        return session, input_id
    made: list[Session] = []

    def write(entry: Pending) -> None:
        made.append(build())  # again on each attempt: a failed create has taken the new session's events
        store.create_session(made[-1], entry)

    with_entry(store, sid, input_id, write, exists=lambda: bool(store.recorder.select_events(sid, limit=1)))
    return made[-1], input_id


def submit_input(store: ChronicleStore, session_id: UUID, text: str, clock: Clock = SYSTEM_CLOCK, kind: str = "prompt",
                 attachments: list[dict[str, Any]] | None = None, origin: dict[str, Any] | None = None) -> str:
    """`origin`: {"channel", "senders", "reply"} of an input a channel queued (runtime/server/channels.py); one
    that wants a reply is indexed in the same transaction (runtime/reply_index.py)."""
    input_id = uuid4().hex
    now = clock.now()

    def queue(session: Session) -> None:
        queue_scanned(session, input_id, text, now, kind=kind, attachments=attachments, origin=origin)

    if not wants_reply(origin):
        store.update_session(session_id, queue)
    else:  # update_session retries a session that changed; what fails here is only the index's slot
        with_entry(store, session_id, input_id, lambda entry: store.update_session(session_id, queue, entry), exists=lambda: False)
    return input_id
