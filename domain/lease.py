"""The SessionLease aggregate: which worker may advance a session, and until when.

Mutual exclusion itself comes from optimistic concurrency: two workers that read the lease at
the same version cannot both record their claim (the second write collides on the version).
The expiry is what lets another worker take over a session whose worker died; the holder
renews the lease well before it runs out. A lease is liveness, not safety: even a stalled
holder that wakes after losing its lease cannot duplicate events, because every aggregate it
writes is version-checked too.

A session has other leases under ids of their own (domain/ids.reply_lease_id): a server posting a
turn's reply holds one, as a POST to a receiver is the one write no version check can take back.
"""

from __future__ import annotations

from datetime import datetime
from uuid import UUID

from eventsourcing.domain import Aggregate, event

from .errors import DomainError
from .event_type import EventType
from .lifecycle import Edge, Lifecycle

LEASE_LIFECYCLE = Lifecycle(
    "SessionLease",
    states=["free", "held"],
    initial="free",
    edges=[
        Edge("acquire", ("free",), "held"),
        Edge("take_over", ("held",), "held"),
        Edge("renew", ("held",), "held"),
        Edge("release", ("held",), "free"),
    ],
    terminal=set(),
)


class LeaseHeld(DomainError):
    """Another live holder has the lease."""


class SessionLease(Aggregate):
    #: Declared, not left to eventsourcing to make: an event class written as a subclass of it is
    #: used as it is, where one written on `Aggregate.Event` is built again as a subclass of this,
    #: and EventType makes it without compiling code (domain/event_type.py).
    class Event(Aggregate.Event, metaclass=EventType):
        pass

    class Created(Aggregate.Created, Event):
        session_id: UUID

    @event(Created)
    def __init__(self, id: UUID, session_id: UUID, timestamp: datetime) -> None:
        self.session_id = session_id
        self.status = "free"
        self.holder: str | None = None
        self.expires_at: datetime | None = None
        self.created_at = timestamp

    def held_by_other(self, holder: str, now: datetime) -> bool:
        return self.status == "held" and self.holder != holder and self.expires_at is not None and self.expires_at > now

    def acquire(self, holder: str, now: datetime, expires_at: datetime, holder_gone: bool = False) -> None:
        """Take a free lease, extend one's own, or take over one whose holder let it expire —
        or is known to be gone (`holder_gone`: a process on this machine that no longer exists)."""
        if self.held_by_other(holder, now) and not holder_gone:
            raise LeaseHeld(f"session {self.session_id} is leased by {self.holder} until {self.expires_at.isoformat()}")  # type: ignore[union-attr]
        if self.status == "free":
            LEASE_LIFECYCLE.next_state("acquire", self.status, self.id)
            self._acquired(holder=holder, expires_at=expires_at, previous=None, timestamp=now)
        else:
            LEASE_LIFECYCLE.next_state("take_over", self.status, self.id)
            self._acquired(holder=holder, expires_at=expires_at, previous=self.holder, timestamp=now)

    @event("Acquired")
    def _acquired(self, holder: str, expires_at: datetime, previous: str | None, timestamp: datetime) -> None:
        self.status = "held"
        self.holder = holder
        self.expires_at = expires_at

    def renew(self, holder: str, now: datetime, expires_at: datetime) -> None:
        LEASE_LIFECYCLE.next_state("renew", self.status, self.id)
        if self.holder != holder:
            raise LeaseHeld(f"session {self.session_id}: the lease passed from {holder} to {self.holder}")
        self._renewed(expires_at=expires_at, timestamp=now)

    @event("Renewed")
    def _renewed(self, expires_at: datetime, timestamp: datetime) -> None:
        self.expires_at = expires_at

    def release(self, holder: str, now: datetime) -> None:
        LEASE_LIFECYCLE.next_state("release", self.status, self.id)
        if self.holder != holder:
            raise LeaseHeld(f"session {self.session_id}: {holder} cannot release a lease held by {self.holder}")
        self._released(holder=holder, timestamp=now)

    @event("Released")
    def _released(self, holder: str, timestamp: datetime) -> None:
        self.status = "free"
        self.holder = None
        self.expires_at = None
