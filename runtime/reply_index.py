"""The index of channel inputs that want a reply: how a server's outbox finds them without loading every session.

An input a channel queued with `reply` (its origin's, decided when it was queued: server/channels.py)
gets an entry here in the same transaction as its InputQueued, so the entry exists exactly when the
input does. The outbox (server/outbox.py, server/pending_replies.py) reads the entries from its
checkpoint (index_checkpoints.py): the sessions it looks at are those with a reply still to send,
however many sessions the store holds.

Entries take the log's next slot; two inputs queued at once race for it, and the loser, whose
transaction wrote nothing, queues again with the slot after.
"""

from __future__ import annotations

import random
import time
from typing import Any, Callable
from uuid import UUID

from eventsourcing.application import EventSourcedLog
from eventsourcing.domain import DomainEvent
from eventsourcing.persistence import IntegrityError

from chronicle.domain.ids import CHRONICLE_NS, uuid5

from .pending import Pending
from .store import ChronicleStore

REPLY_INDEX_ID = uuid5(CHRONICLE_NS, "/replies-wanted")
#: Attempts at a free slot of the index before giving up (as the session index's creators do).
ATTEMPTS = 200


class ReplyWanted(DomainEvent):
    session_id: UUID
    input_id: str


def reply_index(store: ChronicleStore) -> EventSourcedLog[ReplyWanted]:
    return EventSourcedLog(store.events, REPLY_INDEX_ID, ReplyWanted)


def wants_reply(origin: dict[str, Any] | None) -> bool:
    return bool(origin and origin.get("reply"))


def with_entry(store: ChronicleStore, session_id: UUID, input_id: str, write: Callable[[Pending], object],
               exists: Callable[[], bool]) -> None:
    """Run `write(entry)`, which saves the input with the entry in one transaction, until the entry gets a slot.

    `write` raises IntegrityError when the entry's slot was taken (nothing was written then), or
    when something else it writes exists already: `exists()` tells the two apart, and the second
    is the caller's to handle."""
    for attempt in range(ATTEMPTS):
        entry = reply_index(store).trigger_event(session_id=session_id, input_id=input_id)
        try:
            write(Pending(entry))
            return
        except IntegrityError:
            if exists():
                raise
            time.sleep(random.uniform(0, min(0.05, 0.002 * (attempt + 1))))
    raise RuntimeError(f"could not index the input {input_id} of session {session_id}: the reply index kept changing")
