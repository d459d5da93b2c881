"""Session leases in the store: who may advance a session now, renewed while it works.

Acquiring is a versioned write, so of two workers racing for one session exactly one wins.
A worker renews its lease every third of its lifetime; if it dies, the lease runs out and
another worker takes the session over. Leases keep workers from wasting work on the same
session; what makes double execution impossible is the version check on every write.

The same leases, under an id of their own (`key`), claim other work on a session that only one
process should do at a time: a server posting a turn's reply holds the turn's reply lease
(domain/ids.reply_lease_id; runtime/server/outbox.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
import threading
from datetime import timedelta
from typing import Any, AsyncIterator, Iterator
from uuid import UUID, uuid4

from eventsourcing.application import AggregateNotFoundError
from eventsourcing.persistence import IntegrityError, PersistenceError

from chronicle.domain.ids import lease_id
from chronicle.domain.lease import LeaseHeld, SessionLease

from .clock import SYSTEM_CLOCK, Clock
from .lease_holders import holder_gone as holder_gone  # here before it had a module of its own
from .off_loop import off_the_loop
from .store import ChronicleStore

DEFAULT_LEASE_S = 30.0


def holder_name() -> str:
    """Who holds a lease, as `host:pid:nonce`: enough for a person (and this module) to find the process."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid4().hex[:6]}"


def current_lease(store: ChronicleStore, session_id: UUID, key: UUID | None = None) -> SessionLease | None:
    """The session's lease, or with `key` the lease of that id (a reply's), if it was ever taken."""
    try:
        lease: Any = store.repository.get(lease_id(session_id) if key is None else key)
    except AggregateNotFoundError:
        return None
    return lease if isinstance(lease, SessionLease) else None


def held_elsewhere(store: ChronicleStore, session_id: UUID, holder: str, clock: Clock = SYSTEM_CLOCK) -> SessionLease | None:
    """The lease if a live process other than `holder` holds it now (a `run`, `chat` or worker); else None."""
    lease = current_lease(store, session_id)
    if lease is None or not lease.held_by_other(holder, clock.now()) or holder_gone(lease.holder):
        return None
    return lease


def held_by_a_live_process(store: ChronicleStore, session_id: UUID, clock: Clock = SYSTEM_CLOCK) -> bool:
    """Whether a live process (this one included) holds the session's lease now: a turn in flight with no such
    holder is one whose process stopped, which nothing but a `resume` (or a worker) will continue or end."""
    return held_elsewhere(store, session_id, _NO_PROCESS, clock) is not None


#: A holder name no process has: every live holder is another's.
_NO_PROCESS = "no-process"


def acquire(store: ChronicleStore, session_id: UUID, holder: str, ttl_s: float, clock: Clock = SYSTEM_CLOCK,
            key: UUID | None = None) -> bool:
    """True if `holder` now holds the session's lease (with `key`, the lease of that id); False if someone else does."""
    now = clock.now()
    lease = current_lease(store, session_id, key) or SessionLease(
        id=lease_id(session_id) if key is None else key, session_id=session_id, timestamp=now)
    try:
        lease.acquire(holder, now, now + timedelta(seconds=ttl_s), holder_gone=lease.status == "held" and holder_gone(lease.holder))
        store.save(lease)
    except (LeaseHeld, IntegrityError):
        return False
    return True


def renew(store: ChronicleStore, session_id: UUID, holder: str, ttl_s: float, clock: Clock = SYSTEM_CLOCK) -> bool:
    now = clock.now()
    lease = current_lease(store, session_id)
    if lease is None or lease.status != "held" or lease.holder != holder:
        return False
    try:
        lease.renew(holder, now, now + timedelta(seconds=ttl_s))
        store.save(lease)
    except (LeaseHeld, IntegrityError):
        return False
    return True


def release(store: ChronicleStore, session_id: UUID, holder: str, clock: Clock = SYSTEM_CLOCK, key: UUID | None = None) -> None:
    """Best effort: a lease we cannot release simply runs out."""
    try:
        lease = current_lease(store, session_id, key)
        if lease is not None and lease.status == "held" and lease.holder == holder:
            lease.release(holder, clock.now())
            store.save(lease)
    except (LeaseHeld, IntegrityError, PersistenceError):
        pass


class LeaseKeeper:
    """Renews a held lease in the background; `lost` turns true if renewal is refused."""

    def __init__(self, store: ChronicleStore, session_id: UUID, holder: str, ttl_s: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self.store, self.session_id, self.holder, self.ttl_s, self.clock = store, session_id, holder, ttl_s, clock
        self.lost = False
        #: Set by the holder when the event store went away under it: releasing would then retry for
        #: as long as the failed write did (tens of seconds), so the lease is left to run out instead.
        self.store_lost = False
        #: Held by a renewal while it writes (on its own thread: runtime/off_loop.py), and by the
        #: release: a release racing a renewal still in flight would lose the version check, and
        #: the lease would stay held until it ran out.
        self.writing = threading.Lock()

    def _renew(self) -> bool:
        with self.writing:
            return renew(self.store, self.session_id, self.holder, self.ttl_s, self.clock)

    def confirm(self) -> bool:
        """Renew now, before work another holder must not overlap (files about to be written): False, and `lost`,
        if the lease has gone to someone else since it was last renewed."""
        if not self.lost and not self._renew():
            self.lost = True
        return not self.lost

    async def _renew_forever(self) -> None:
        while True:
            await asyncio.sleep(self.ttl_s / 3)
            try:
                ok = await off_the_loop(self._renew)
            except PersistenceError:
                continue  # the store is away; the next attempt may reach it before the lease runs out
            if not ok:
                self.lost = True
                return


@contextlib.asynccontextmanager
async def leased(store: ChronicleStore, session_id: UUID, holder: str, ttl_s: float,
                 clock: Clock = SYSTEM_CLOCK) -> AsyncIterator[LeaseKeeper | None]:
    """Hold the session's lease for the block (None if another holder has it), then release it."""
    if not acquire(store, session_id, holder, ttl_s, clock):
        yield None
        return
    keeper = LeaseKeeper(store, session_id, holder, ttl_s, clock)
    task = asyncio.ensure_future(keeper._renew_forever())
    try:
        yield keeper
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        if not keeper.store_lost:
            with keeper.writing:
                release(store, session_id, holder, clock)


@contextlib.contextmanager
def holding(store: ChronicleStore, session_id: UUID, holder: str, ttl_s: float = DEFAULT_LEASE_S,
            clock: Clock = SYSTEM_CLOCK) -> Iterator[LeaseKeeper | None]:
    """`leased` for code that is not async (resume's and doctor's file writes): the lease is renewed every third
    of its lifetime on a thread of its own while the block runs, so work longer than the lease (a large undo
    --files) is not taken over halfway by a worker that saw the lease run out. `keeper.lost` turns true if a
    renewal is refused: the block checks it before it records what it did. None if another holder has it."""
    if not acquire(store, session_id, holder, ttl_s, clock):
        yield None
        return
    keeper = LeaseKeeper(store, session_id, holder, ttl_s, clock)
    done = threading.Event()

    def renew_until_done() -> None:
        while not done.wait(ttl_s / 3):
            try:
                if not keeper._renew():
                    keeper.lost = True
                    return
            except Exception:  # noqa: BLE001 - the store is away (or failed this once): the next attempt may reach it
                continue       # before the lease runs out; a thread's traceback would only reach the terminal

    thread = threading.Thread(target=renew_until_done, name=f"lease-{session_id.hex[:8]}", daemon=True)
    thread.start()
    try:
        yield keeper
    finally:
        done.set()
        thread.join()
        with keeper.writing:
            release(store, session_id, holder, clock)
