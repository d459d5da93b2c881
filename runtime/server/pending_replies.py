"""The channel inputs whose reply the outbox has still to send, found from the reply index (runtime/reply_index.py).

The outbox's full scan used to load every session of the store to find the few a channel fed. It
reads the index instead, from its checkpoint (runtime/index_checkpoints.py): the position at or
below which every indexed input has its reply recorded (or its session was erased). Entries above
it are kept in memory until their reply is recorded, and the checkpoint follows the first one still
due, so a restarted server looks at the sessions with a reply due and at no other.

Inputs queued before the index existed have no entry: while the store has no checkpoint, the scan
also looks at every session once, the old way, and keeps those with such a reply unsent. The first
checkpoint is written only when none is left, so a restart before that looks again. Imported inputs
have no entry either, and are not answered here (runtime/import_log.py): that look passes them by.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from uuid import UUID

from chronicle.domain.ids import turn_id as make_turn_id
from chronicle.domain.session import Session
from chronicle.runtime.import_log import Imports
from chronicle.runtime.index_checkpoints import CheckpointedRead
from chronicle.runtime.reply_index import REPLY_INDEX_ID, reply_index
from chronicle.runtime.store import ChronicleStore, NotFound


@dataclass
class PendingReplies:
    store: ChronicleStore
    #: (session, input) -> the entry's position, for each indexed input whose reply is not recorded yet.
    waiting: dict[tuple[UUID, str], int] = field(default_factory=dict)
    read: CheckpointedRead | None = None  # made at the first look
    #: Sessions with a reply unsent for an input queued before the index; None: not looked for.
    unindexed: set[UUID] | None = None
    #: The turns whose replies are the store's an import came from (runtime/import_log.py): never sent here.
    imports: Imports = field(init=False)

    def __post_init__(self) -> None:
        self.imports = Imports(self.store)

    def sessions(self) -> set[UUID]:
        """The sessions with a reply still to send, after reading the entries written since the last look."""
        if self.read is None:
            self.read = CheckpointedRead(self.store, REPLY_INDEX_ID, "outbox", "")
        for entry in self.read.new(reply_index(self.store)):
            self.waiting[(entry.session_id, entry.input_id)] = entry.originator_version
        assert self.read.checkpoint is not None  # read by `new`
        if self.read.checkpoint.position is None and self.unindexed is None:
            self.imports.unanswered()
            self.unindexed = {s.id for s in self.store.sessions() if self._unindexed_unsent(s)}
        return {sid for sid, _ in self.waiting} | (self.unindexed or set())

    def let_go(self) -> None:
        """Forget the inputs whose reply is recorded now, and move the checkpoint up to the first one still due."""
        read = self.read
        if read is None or read.checkpoint is None:
            return
        for sid, input_id in list(self.waiting):
            session = self._session(sid)
            # An entry commits with its input, so an input the session never queued was never one: a message auth mode
            # took as a credential (seed 001), which no turn will answer.
            if session is None or str(make_turn_id(sid, input_id)) in session.replies or input_id not in session.input_origins:
                del self.waiting[(sid, input_id)]
        if read.checkpoint.position is None and self.unindexed is None:
            return  # the look for inputs queued before the index did not finish (a lost database): no checkpoint yet
        if self.unindexed:
            self.unindexed = {sid for sid in self.unindexed if (s := self._session(sid)) is not None and self._unindexed_unsent(s)}
        if not self.unindexed:
            if read.cursor is None:  # an empty index: a checkpoint at 0 says the look for older inputs is done
                read.checkpoint.advance(0)
            else:
                read.advance_below(self.waiting.values())

    def _session(self, sid: UUID) -> Session | None:
        try:
            return self.store.session(sid, copy=False)  # only read
        except NotFound:
            return None  # erased: nothing is sent to it

    def _unindexed_unsent(self, session: Session) -> bool:
        return any(origin.get("reply") and (session.id, input_id) not in self.waiting
                   and str(tid := make_turn_id(session.id, input_id)) not in session.replies and tid not in self.imports.turns
                   for input_id, origin in list(session.input_origins.items()))
