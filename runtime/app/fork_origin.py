"""Where a fork came from, and whether that session is in this store.

A fork imported from a bundle (runtime/bundle.py) brings the turns it inherits but not the session
it was forked from, so its `forked_from` names a session the store may not hold. `history`, `log`,
`sessions` and `verify` say so in the same words instead of leaving a reader to look for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection


@dataclass(frozen=True)
class ForkOrigin:
    session_id: str
    turn: int | None
    #: False when the store does not hold the session (a fork imported without it).
    present: bool

    def line(self) -> str:
        at = f" at turn {self.turn}" if self.turn else ""
        return f"forked from {self.session_id}{at}" + ("" if self.present else " (not in this store)")


def origin_of(forked_from: dict[str, Any] | None, known: Collection[str]) -> ForkOrigin | None:
    """`forked_from` as recorded (None: not a fork), against the ids of the sessions the store holds."""
    if not forked_from or not forked_from.get("session_id"):
        return None
    origin = str(forked_from["session_id"])
    return ForkOrigin(origin, forked_from.get("turn"), origin in known)


def fork_origin(store: Any, session: Any) -> ForkOrigin | None:
    """The origin of a session read from the store; present if the store's index lists it."""
    if not session.forked_from:
        return None
    from chronicle.runtime.store import NotFound

    origin = str(session.forked_from.get("session_id") or "")
    try:
        from uuid import UUID

        store.session(UUID(origin), copy=False)
        known: Collection[str] = (origin,)
    except (NotFound, ValueError):
        known = ()
    return origin_of(session.forked_from, known)
