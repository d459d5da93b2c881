"""Which sessions have work, kept current from the log instead of loading every session per poll.

A worker used to list every session and load each one (a query, a decode, a deep copy) on
every poll — with several workers polling every 100 ms, that was most of what the database
did. The index here reads every session once, then only the log after its position: one
query per poll when nothing happened, and a recheck of just the sessions whose events (or
whose running turn's, or whose waiting tool calls') moved. Every answer is still checked
with `needs_work` under the session's lease before anything runs, and a full rescan every
RESCAN_S heals anything missed, so a stale entry costs a lease round, never a wrong turn.
"""

from __future__ import annotations

import random
import time
from typing import Any
from uuid import UUID

from chronicle.domain.session import Session

from .session_work import needs_work, pending_approvals
from .store import ChronicleStore, NotFound, UnreadableEvent

#: Seconds between full rescans (a safety net; the log normally says everything).
RESCAN_S = 30.0
#: At most this share of a worker's time goes to full rescans: a store whose scan takes longer than
#: RESCAN_S × SCAN_SHARE (0.3 s; ≈ 3,600 sessions on PostgreSQL) is rescanned less often, not more of the time.
SCAN_SHARE = 0.01
BATCH = 1000


class WorkIndex:
    def __init__(self, store: ChronicleStore, auto_approve: bool = False, rescan_s: float = RESCAN_S) -> None:
        self.store, self.auto_approve, self.rescan_s = store, auto_approve, rescan_s
        self.position: int | None = None
        self.scanned_at = 0.0
        #: Seconds until the next full rescan: rescan_s, or longer when a scan took more than SCAN_SHARE of it.
        self.rescan_after = rescan_s
        self.order: dict[UUID, int] = {}  # top-level sessions, in creation order
        self.with_work: set[UUID] = set()
        self.owner: dict[str, UUID] = {}  # aggregate id (hex) -> the session whose verdict it can change
        self.owned: dict[UUID, list[str]] = {}  # and back
        self.unreadable: dict[UUID, str] = {}  # sessions left out because an event does not decode

    def sessions(self) -> list[UUID]:
        """Top-level sessions with something to do, oldest first."""
        if self.position is None or time.monotonic() - self.scanned_at > self.rescan_after:
            self._scan()
        else:
            self._follow()
        return sorted(self.with_work, key=self.order.__getitem__)

    def spread(self, sessions: list[UUID], name: str) -> list[UUID]:
        """The same list, starting at a place that depends on the worker: two workers polling
        at once try different sessions first instead of racing for the same leases."""
        if not sessions:
            return sessions
        start = random.Random(f"{name}:{len(sessions)}").randrange(len(sessions))
        return sessions[start:] + sessions[:start]

    def _scan(self) -> None:
        self.position = self.store.max_position()  # first: what is written during the scan is followed next time
        self.scanned_at = time.monotonic()
        self.order, self.with_work, self.owner, self.owned = {}, set(), {}, {}
        # Every session read in batches (ChronicleStore.sessions): read one by one, a scan of 3,000 sessions took a
        # worker 1.5 s on PostgreSQL at start and at every rescan.
        for session in self.store.sessions(on_error=self._unreadable):
            self._judge(session)
        self.rescan_after = max(self.rescan_s, (time.monotonic() - self.scanned_at) / SCAN_SHARE)

    def _follow(self) -> None:
        touched: set[UUID] = set()
        recorder: Any = self.store.recorder
        while True:
            notes = recorder.select_notifications(start=self.position, limit=BATCH, inclusive_of_start=False)
            for note in notes:
                key = _hex(note.originator_id)
                if key in self.owner:
                    touched.add(self.owner[key])
                elif note.topic.endswith("Session.Started"):
                    touched.add(UUID(key))
            if not notes:
                break
            self.position = notes[-1].id
            if len(notes) < BATCH:
                break
        for sid in touched:
            self._check(sid)

    def _check(self, sid: UUID) -> None:
        try:
            session = self.store.session(sid, copy=False)
        except NotFound:
            return
        except UnreadableEvent as exc:
            self._unreadable(sid, exc)
            return
        self._judge(session)

    def _unreadable(self, sid: UUID, exc: Exception) -> None:
        """One damaged session must not stop every worker on the store: it is left out (and named once by the
        worker); `chronicle doctor` lists it. A session indexed but never written is passed over."""
        if isinstance(exc, UnreadableEvent):
            self.with_work.discard(sid)
            self.unreadable.setdefault(sid, str(exc))

    def _judge(self, session: Session) -> None:
        sid = session.id
        if session.parent_session_id is not None:
            return  # sub-agents are driven by their parents
        self.order.setdefault(sid, len(self.order))
        for key in self.owned.pop(sid, []):
            self.owner.pop(key, None)
        keys = [sid.hex]
        if session.active_turn_id is not None:
            keys.append(session.active_turn_id.hex)
            keys.extend(call.id.hex for call in pending_approvals(self.store, session))
        self.owned[sid] = keys
        self.owner.update(dict.fromkeys(keys, sid))
        if needs_work(self.store, session, self.auto_approve):
            self.with_work.add(sid)
        else:
            self.with_work.discard(sid)


def _hex(value: Any) -> str:
    return value.hex if isinstance(value, UUID) else UUID(str(value)).hex
