"""The sessions `chronicle import` brought into this store, logged in the import's own transaction.

Their turns ran in the store the bundle came from, and a channel turn's reply is that store's
server's to post (or to have posted): a server here, on another database, shares no reply lease
with it, so posting what the bundle shows unsent could send an answer twice, or long after the
fact. Imported inputs get no reply index entry (runtime/reply_index.py), so a server here does not
find them through it; and its outbox passes by the turns this log names wherever else it meets
them: in its one look at every session for inputs queued before the index existed
(server/pending_replies.py), and in a session it routes a new channel input to, whose new turn it
answers. An input the source had queued and not yet run is one of them too: whether and where it
is answered was decided by the source's channel. The entries name ids only, as the session index's do.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, TypedDict
from uuid import UUID

from eventsourcing.application import EventSourcedLog
from eventsourcing.domain import DomainEvent

from chronicle.domain.ids import CHRONICLE_NS, turn_id, uuid5
from chronicle.domain.session import Session

from .store import ChronicleStore

IMPORT_LOG_ID = uuid5(CHRONICLE_NS, "/imports")


class Provenance(TypedDict):
    """Where an import came from, so `audit` can say whose bundle this store took in and on what evidence: the
    signer's Ed25519 public key (hex; None: unsigned), whether the import required it (`--key`), the bundle's
    head digest (its manifest's `head`, which a signature covers), the source store's chain head when it was
    exported (`{seq, position, digest}`, None for a source with no chain), `exported_at` as the manifest says
    it, the sha256 of the bundle as given (its file's bytes; None when a program passed it parsed), and who
    imported it. Digests and ids only, as the session index's entries: nothing of the sessions' content."""

    signed_by: str | None
    key_required: bool
    bundle_head: str
    source_head: dict[str, Any] | None
    exported_at: str | None
    bundle_sha256: str | None
    actor: str


class SessionsImported(DomainEvent):
    """One import: the sessions it listed in the session index (a bundle's whole tree), the turns of
    their channel inputs that want a reply the bundle does not record (`unanswered_turns`), and where the
    bundle came from (`provenance`, v2; None on an entry written before it was kept)."""

    session_ids: list[UUID]
    unanswered_turns: list[UUID]
    provenance: Provenance | None

    class_version = 2

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["provenance"] = None


def import_log(store: ChronicleStore) -> EventSourcedLog[SessionsImported]:
    return EventSourcedLog(store.events, IMPORT_LOG_ID, SessionsImported)


def unanswered_turns(events: Iterable[Any]) -> list[UUID]:
    """The turns of the inputs among a bundle's decoded `events` that want a reply (their origin's `reply`,
    decided when the source queued them) and have no ReplyDelivered/ReplyFailed among them."""
    wanted: dict[UUID, None] = {}
    recorded: set[UUID] = set()
    for event in events:
        if isinstance(event, (Session.InputQueued, Session.InputWithAttachmentsQueued)) and event.origin and event.origin.get("reply"):
            wanted[turn_id(event.originator_id, event.input_id)] = None
        elif isinstance(event, (Session.ReplyDelivered, Session.ReplyFailed)):
            recorded.add(event.turn_id)
    return [tid for tid in wanted if tid not in recorded]


@dataclass
class Imports:
    """A reader's set of turns whose replies are another store's, read from where its last look stopped."""

    store: ChronicleStore
    turns: set[UUID] = field(default_factory=set)
    cursor: int | None = None

    def unanswered(self) -> set[UUID]:
        for entry in import_log(self.store).get(gt=self.cursor):
            self.turns.update(entry.unanswered_turns)
            self.cursor = entry.originator_version
        return self.turns
