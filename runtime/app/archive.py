"""Archive and unarchive: how a session leaves the listings without anything being deleted.

Chronicle's log is its audit trail, so "delete" is an archive: a `Session.Archived` event hides
the session from `sessions` (and `--all` shows it again, marked), `unarchive` records the way
back. Nothing is purged: every command that takes a session id still reads an archived one.
"""

from __future__ import annotations

from uuid import UUID

from chronicle.domain.errors import DomainError

from ..actor import recorded_actor
from ..clock import SYSTEM_CLOCK, Clock
from ..store import ChronicleStore
from .errors import AppError
from .queries import session_id


def archive(store: ChronicleStore, ref: str | UUID, actor: str | None = None, clock: Clock = SYSTEM_CLOCK) -> UUID:
    """A cancelled job's queued input is never run (`jobs cancel`; `sessions` lists it cancelled, nothing queued),
    so it does not keep the session from being archived as an input that waits for a worker does."""
    from ..jobs import cancelled

    sid = session_id(store, ref)
    never_runs = cancelled(store, sid)
    return _change(store, sid, lambda s, now, who: s.archive(now, actor=who, queue_never_runs=never_runs), actor, clock)


def unarchive(store: ChronicleStore, ref: str | UUID, actor: str | None = None, clock: Clock = SYSTEM_CLOCK) -> UUID:
    return _change(store, ref, lambda s, now, who: s.unarchive(now, actor=who), actor, clock)


def _change(store: ChronicleStore, ref: str | UUID, command, actor: str | None, clock: Clock) -> UUID:  # type: ignore[no-untyped-def]
    sid = session_id(store, ref)
    who = recorded_actor(actor)
    try:
        store.update_session(sid, lambda s: command(s, clock.now(), who))
    except DomainError as exc:
        from .stalled import stalled_note

        raise AppError(str(exc) + stalled_note(store, sid), 1) from None
    return sid
