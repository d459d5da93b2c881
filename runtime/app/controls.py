"""Steer, cancel and compact a session from outside the process running it.

Requests are recorded on the Session (runtime/controls.py records them; the running loop reads
them through the port it is handed), so these work from any process or machine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from uuid import UUID

from chronicle.domain.errors import DomainError

from .. import controls
from ..compaction import CompactionResult, CompactionSettings, Compactor
from ..live import Broker
from ..loop import AgentLoop
from ..store import ChronicleStore
from .errors import AppError
from .loops import LoopSetupError, compaction_loop
from .queries import session_id

CANCEL_REASON = "cancelled by request"


def steer(store: ChronicleStore, ref: str | UUID, message: str, wait_batch: bool = False,
          actor: str | None = None, turn_id: str | UUID | None = None) -> controls.SteerResult:
    """`turn_id`: the turn meant (chat passes the one it shows); if it has ended, AppError (exit 1)
    and nothing is recorded, instead of the message quietly becoming the session's next input."""
    if not message.strip():
        raise AppError("the steering message is empty; say what the agent should do", 2)
    expected = _turn_id(turn_id)
    sid = session_id(store, ref)
    try:
        return controls.steer(store, sid, message, wait_batch=wait_batch, actor=actor, turn_id=expected)
    except DomainError as exc:
        raise AppError(str(exc), 1) from None


def _turn_id(value: str | UUID | None) -> UUID | None:
    if value is None or isinstance(value, UUID):
        return value
    try:
        return UUID(value.strip())
    except ValueError:
        raise AppError(f"not a turn id: {value!r} (the whole id, as `steer --json` or `history --json` print it)", 2) from None


@dataclass(frozen=True)
class Cancelled:
    session_id: UUID
    turn_id: UUID | None
    #: idle (nothing ran) | cancelled (a paused turn, here and now) | requested (no process confirmed) | the turn's end status
    status: str
    paused: bool = False
    #: The same request (this turn, this reason) was pending already, so this one recorded nothing.
    already_requested: bool = False

    def row(self) -> dict[str, Any]:
        """`cancel --json`; `already_requested` only when true, so the usual answer keeps its three fields."""
        row: dict[str, Any] = {"session_id": str(self.session_id), "turn_id": str(self.turn_id) if self.turn_id else None,
                               "status": self.status}
        if self.already_requested:
            row["already_requested"] = True
        return row


def cancel_auth(store: ChronicleStore, sid: UUID, actor: str | None = None) -> bool:
    """A cancel with no turn running still ends auth mode (seed 001: any control submission does); whether it did."""
    from ..credentials import leave_auth

    return leave_auth(store, sid, "cancel", actor) is not None


def cancel(store: ChronicleStore, ref: str | UUID, wait_s: float = 10.0, reason: str = CANCEL_REASON,
           actor: str | None = None) -> Cancelled:
    """Cancel the running turn; wait up to `wait_s` for the process running it to confirm."""
    sid = session_id(store, ref)
    if store.session(sid).active_turn_id is None:
        return Cancelled(sid, None, "auth_cancelled" if cancel_auth(store, sid, actor) else "idle")
    paused = controls.cancel_paused_turn(store, sid, reason, actor=actor)
    if paused is not None:
        return Cancelled(sid, paused, "cancelled", paused=True)
    waiting = controls.TurnEndWait(store, sid) if wait_s > 0 else None  # listening before the request is recorded
    try:
        try:
            turn_id, already = controls.record_cancel_request(store, sid, reason, actor=actor)
        except DomainError:
            # The only refusal: no turn running when the request was written (read afresh there). The turn ended
            # between the look above and the request; that the next queued input may have started a turn since
            # does not make it the one this cancel was asked for.
            return Cancelled(sid, None, "idle")
        if waiting is None or not waiting.ended(turn_id, wait_s):
            return Cancelled(sid, turn_id, "requested", already_requested=already)
    finally:
        if waiting is not None:
            waiting.close()
    return Cancelled(sid, turn_id, store.turn(turn_id).status, already_requested=already)


async def compact(store: ChronicleStore, ref: str | UUID, strategy: str = "summary", keep: int | None = None,
                  provider: str | None = None, loop: AgentLoop | None = None, broker: Broker | None = None) -> CompactionResult:
    """Summarise (or truncate) older turns; `loop` is the caller's own (chat), else one is built for it."""
    if strategy not in ("summary", "truncate", "workspace"):
        raise AppError(f"unknown strategy {strategy!r}: use summary, truncate or workspace", 2)
    sid = session_id(store, ref)
    if loop is None:
        try:
            loop = compaction_loop(store, store.session(sid), provider, broker=broker)
        except LoopSetupError as exc:
            raise AppError(str(exc), 2) from None
    compactor = loop.compactor or Compactor(CompactionSettings())
    if keep is None:
        keep = compactor.settings.keep_recent
    return await compactor.compact(loop.io, sid, strategy=strategy, keep_recent=keep)
