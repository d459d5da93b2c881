"""How a run of a turn ends: the outcome it reports, and the writes that end the turn.

Every way out of the loop — an answer, a guard's stop, a cancel, a middleware's failure, a
crash, a lost store — comes through here, so each ends the turn and frees its session the same
way, and the few that must not end it (another writer owns the turn, the store is gone) say so
in one place. Functions over the loop's I/O bundle, like the model caller and the tool runner:
none of them needs the loop.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from uuid import UUID

from eventsourcing.persistence import IntegrityError, PersistenceError

from chronicle.domain.session import Session
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn

from .actor import process_actor
from .credentials import record_requests
from .hooks import Stop
from .live import ErrorEvent, ToolEnd
from .loop_io import LoopIO
from .middleware import MiddlewareFailure
from .pasteable import pasteable
from .secret_scan import scanner_for
from .shred_marks import forgotten_cause
from .store import TURN_ATTEMPTS
from .store_errors import DISK_FULL, is_damaged, is_driver_connection_error
from .tools.threads import left_running_note

EXIT_CODES = {"completed": 0, "failed": 1, "awaiting_approval": 3, "stopped": 4, "cancelled": 130}


@dataclass
class TurnOutcome:
    session_id: UUID
    turn_id: UUID | None
    status: str
    text: str = ""
    reason: str | None = None
    #: The input the turn answered, where the turn was in hand (a run's result names it without reading the turn again).
    input_id: str | None = None

    @property
    def exit_code(self) -> int:
        return EXIT_CODES.get(self.status, 1)


def finish(io: LoopIO, session: Session, turn: Turn, status: str, reason: str | None = None, error: dict | None = None) -> TurnOutcome:
    """End the turn and free the session in one transaction.

    A version conflict on the session alone (an input submitted meanwhile) is retried on a
    fresh copy by update_session; a conflict on the turn means someone else advanced it, and
    is raised. The caller's `session` is handed over (update_session's `held`): it is changed.
    """
    now = io.clock.now()
    if status != "completed":
        # A reason carries words from elsewhere (a provider's or a tool server's error, a hook's exception, a script):
        # scanned as everything else the turn records is, since `log`, `why`, `audit` and exports show it for good.
        found = scanner_for(io.workspace).value({"reason": reason, "error": error})
        turn.note_redactions(f"turn {status}: reason", found.counts, now)
        reason, error = found.value["reason"], found.value["error"]
    if status == "completed":
        turn.complete(now)
    elif status == "cancelled":
        turn.cancel(reason or "cancelled", now, actor=process_actor())
    elif status == "stopped":
        turn.stop((error or {}).get("guard", "guard"), reason or "stopped by a guard", now)
    else:
        turn.fail(reason or "failed", now, error=error)
    asked = io.credential_requests

    def end(s: Session) -> None:
        s.end_turn(turn.id, now)
        record_requests(s, dict(asked), now)  # a copy: a retried update records it again on the fresh session

    io.store.update_session(session.id, end, turn, held=session, attempts=TURN_ATTEMPTS)
    asked.pop(str(session.id), None)
    return TurnOutcome(session.id, turn.id, turn.status, text=turn.final_text or "", reason=reason, input_id=turn.input_id)


async def stop_turn(io: LoopIO, session: Session, turn: Turn, stop: Stop) -> TurnOutcome:
    """A guard's stop; a Stop carrying an error (a user's hook that raised) fails the turn with it instead."""
    await io.emit(ErrorEvent(session_id=str(session.id), turn_id=str(turn.id), message=stop.reason, kind=f"guard:{stop.guard}"))
    if stop.error is not None:
        return finish(io, session, turn, "failed", stop.reason, error=stop.error)
    return finish(io, session, turn, "stopped", stop.reason, error={"guard": stop.guard})


async def cancel_turn(io: LoopIO, session: Session, turn: Turn, reason: str) -> TurnOutcome:
    session = io.store.session(session.id)
    turn = io.store.turn(turn.id)
    return finish(io, session, turn, "cancelled", reason)


def cancel_pending(session: Session, turn_id: UUID) -> str | None:
    """The reason of a cancel recorded for this turn and not yet honoured; None if there is none."""
    request = session.cancel_requested
    return str(request["reason"]) if request and request["turn_id"] == turn_id else None


async def cancelled_in_flight(io: LoopIO, session: Session, turn: Turn, reason: str) -> TurnOutcome:
    """A turn found in flight with a cancel recorded while no process ran it (its process was killed, then
    `chronicle cancel` or `jobs cancel`): it ends cancelled before anything more runs, as a live cancel ends it. The
    cancel watcher's first check raced the resumed loop, which made its next model call and ran its tools first.
    Calls of the open step still pending are cancelled; one found running is recorded as interrupted (it was not
    run to its end, and is not run again)."""
    from chronicle.domain.ids import tool_call_ids

    step = turn.open_step
    if step is not None:
        now = io.clock.now()
        calls = [io.store.tool_call(cid) for cid in tool_call_ids(turn.id, [step])]
        for call in calls:
            if call.status == "running":
                call.interrupt("found running after the process stopped", now)
        cancel_calls(io, calls, reason)
        turn.close_step(calls, now)
        io.save(*calls, turn)
        await tools_ended(io, [c for c in calls if c.status in ("cancelled", "interrupted")])
    outcome = await cancel_turn(io, session, turn, reason)
    try:
        from .control_probes import notify_control

        notify_control(io.store, session.id)  # a `cancel --wait` may be waiting for this end
    except Exception:  # noqa: BLE001 - its own look finds the end a little later
        pass
    return outcome


async def middleware_failed(io: LoopIO, session: Session, turn: Turn, failure: MiddlewareFailure) -> TurnOutcome:
    """A middleware failed the run: the turn fails naming it. If the run had already ended the turn, the
    failure is a Turn.MiddlewareApplied decision (`action: failed`) on it instead."""
    await io.emit(ErrorEvent(session_id=str(session.id), turn_id=str(turn.id), message=str(failure), kind=f"middleware:{failure.name}"))
    session = io.store.session(session.id)
    turn = io.store.turn(turn.id)
    if turn.finished:
        turn.record_middleware({"middleware": failure.name, "action": "failed", "kind": failure.kind, "reason": str(failure)},
                               io.clock.now())
        io.save(turn)
        if session.active_turn_id == turn.id:
            now = io.clock.now()
            io.store.update_session(session.id, lambda s: s.end_turn(turn.id, now), attempts=TURN_ATTEMPTS)
        return TurnOutcome(session.id, turn.id, turn.status, text=turn.final_text or "", reason=turn.reason, input_id=turn.input_id)
    return finish(io, session, turn, "failed", str(failure), error={"middleware": failure.name, "kind": failure.kind})


async def crashed(io: LoopIO, session: Session, turn: Turn, exc: Exception) -> TurnOutcome:
    """An unexpected error: record it as the turn's failure if the store still answers.

    Two errors are not the turn's fault and leave it in flight instead: a version conflict
    (another process advanced the session; it owns the turn now) and a lost connection to
    the store (nothing half-written survives a failed transaction, so `resume` continues) —
    eventsourcing's errors, or psycopg's own from a connection it does not wrap: one dropped
    connection recorded a long turn as failed, which no resume could take back.
    """
    if isinstance(exc, PersistenceError) or is_driver_connection_error(exc):
        outcome = left_in_flight(session.id, turn.id, exc, io.store.url)
        kind = "conflict" if outcome.status == "conflict" else "store"
        await io.emit(ErrorEvent(session_id=str(session.id), turn_id=str(turn.id), message=outcome.reason or "", kind=kind))
        return outcome
    if (erased := forgotten_cause(exc)) is not None:
        return await forgotten_under(io, session.id, turn.id, erased)
    reason = f"internal error: {type(exc).__name__}: {exc}"
    await io.emit(ErrorEvent(session_id=str(session.id), turn_id=str(turn.id), message=reason, kind="internal"))
    try:
        session = io.store.session(session.id)
        turn = io.store.turn(turn.id)
        if not turn.finished:
            return finish(io, session, turn, "failed", reason)
    except Exception:  # noqa: BLE001 - the store is gone too; resume will find the turn in flight
        pass
    return TurnOutcome(session.id, turn.id, "failed", reason=reason, input_id=turn.input_id)


async def forgotten_under(io: LoopIO, session_id: UUID, turn_id: UUID | None, erased: Exception) -> TurnOutcome:
    """The session was forgotten (by another process) while this one ran it: the turn stops here.
    Nothing is recorded, not even its failure: the tree's events can no longer be written, which is
    what forgetting means (runtime/shred_marks.py); the caller and the live stream are told."""
    reason = f"{erased}; the turn stopped and nothing more of it was recorded"
    await io.emit(ErrorEvent(session_id=str(session_id), turn_id=str(turn_id) if turn_id else None, message=reason, kind="forgotten"))
    return TurnOutcome(session_id, turn_id, "failed", reason=reason)


def left_in_flight(session_id: UUID, turn_id: UUID | None, exc: Exception, url: str | None) -> TurnOutcome:
    """`url`: the store's, for the resume it suggests (runtime/pasteable.py)."""
    if isinstance(exc, IntegrityError):
        reason = f"another process advanced session {session_id} at the same time; this process left the turn to it"
        return TurnOutcome(session_id, turn_id, "conflict", reason=reason)
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    # What a resume at once would meet again: a full disk, a lock another process holds, a damaged file.
    then = ("the disk holding the store is full: free some space, then " if DISK_FULL.search(first)
            else "another process holds the store's write lock: once it is done, " if "database is locked" in first
            else "the store's file is damaged (`chronicle doctor` says what to do); once it is mended, " if is_damaged(exc)
            else "")
    reason = (f"lost the event store ({type(exc).__name__}: {first}); the turn is still in flight and {then}"
              f"`{pasteable(f'resume {session_id}', url)}` continues it")
    return TurnOutcome(session_id, turn_id, "interrupted", reason=reason)


def cancel_calls(io: LoopIO, calls: list[ToolCall], reason: str, left_running: Collection[UUID] = ()) -> list[ToolCall]:
    """`left_running`: calls whose sync function the cancel could not stop; their result says so."""
    now = io.clock.now()
    cancelled = [c for c in calls if c.status in ("pending", "awaiting_approval", "approved", "running")]
    for call in cancelled:
        call.cancel(f"{reason}; {left_running_note(call.name)}" if call.id in left_running else reason, now)
    return cancelled


async def tools_ended(io: LoopIO, calls: list[ToolCall]) -> None:
    """tool_end for calls resolved without running to the end (cancelled, skipped), once stored:
    every tool_start, and every call the model asked for, gets its end line."""
    for call in calls:
        block = call.result_block()
        await io.emit(ToolEnd(
            session_id=str(call.session_id), tool_call_id=str(call.id), tool_use_id=call.tool_use_id, name=call.name,
            status=call.status, output=block.content, is_error=block.is_error, duration_ms=call.duration_ms,
        ))
