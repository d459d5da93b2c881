"""Steering and cancel across processes: requests are Session events, the running loop polls.

`chronicle steer` and `chronicle cancel` may run in another process (or on another machine)
than the loop running the turn, so a request cannot be a signal or a callback: it is recorded
on the Session, and the running loop notices it. Cancel is polled by a background task every
few hundred milliseconds (one cheap fast-forward query on a cached aggregate); steering is read
at the loop's safe points, between tool calls, where it can be acted on.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

from chronicle.domain.content import TextBlock
from chronicle.domain.session import Session

from .actor import process_actor
from .clock import SYSTEM_CLOCK, Clock
from .store import ChronicleStore

POLL_S = 0.25
STEERING_SKIP_REASON = "the user sent a steering message before this tool started, so it was not run"


class CancelWatcher:
    """Polls the store while a turn runs; cancels the turn's task when a cancel is requested."""

    def __init__(self, store: ChronicleStore, session_id: UUID, turn_id: UUID, task: asyncio.Task, poll_s: float = POLL_S) -> None:
        self.store = store
        self.session_id = session_id
        self.turn_id = turn_id
        self.task = task
        self.poll_s = poll_s
        self.reason: str | None = None
        self._watching: asyncio.Task | None = None

    def start(self) -> None:
        self._watching = asyncio.ensure_future(self._watch())

    async def stop(self) -> None:
        if self._watching is not None and not self._watching.done():
            self._watching.cancel()
            try:
                await self._watching
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - the watcher's end never matters
                pass

    def requested(self) -> str | None:
        try:
            session = self.store.session(self.session_id)
        except Exception:  # noqa: BLE001 - a store hiccup must not cancel or crash the turn
            return None
        request = session.cancel_requested
        if request and request["turn_id"] == self.turn_id:
            return request["reason"]
        return None

    async def _watch(self) -> None:
        while True:
            reason = self.requested()
            if reason is not None:
                self.reason = reason
                self.task.cancel()
                return
            await asyncio.sleep(self.poll_s)


@dataclass(frozen=True)
class Steering:
    steer_ids: list[str]
    texts: list[str]
    skip_unstarted: bool

    def blocks(self) -> list[TextBlock]:
        return [TextBlock(text=text) for text in self.texts]


def pending_steering(store: ChronicleStore, session_id: UUID, turn_id: UUID) -> Steering | None:
    """Steering recorded for this turn and not yet delivered; None if there is none."""
    items = [s for s in store.session(session_id).steering if s["turn_id"] == turn_id]
    if not items:
        return None
    return Steering(
        steer_ids=[s["steer_id"] for s in items],
        texts=[s["text"] for s in items],
        skip_unstarted=any(not s.get("wait_batch") for s in items),
    )


# -- what the CLI commands record -----------------------------------------------------------


@dataclass(frozen=True)
class SteerResult:
    outcome: str  # "steering" | "queued"
    session_id: UUID
    turn_id: UUID | None
    steer_id: str


def steer(store: ChronicleStore, session_id: UUID, text: str, wait_batch: bool = False, clock: Clock = SYSTEM_CLOCK,
          actor: str | None = None) -> SteerResult:
    """`actor`: who steers (default: this process's user@host; a server passes its caller)."""
    steer_id = uuid4().hex
    actor = actor or process_actor()
    now = clock.now()
    seen: dict[str, Any] = {}

    def command(session: Session) -> None:
        seen["outcome"] = session.steer(steer_id, text, now, wait_batch=wait_batch, actor=actor)
        seen["turn_id"] = session.active_turn_id

    store.update_session(session_id, command)
    return SteerResult(seen["outcome"], session_id, seen["turn_id"], steer_id)


def request_cancel(store: ChronicleStore, session_id: UUID, reason: str, clock: Clock = SYSTEM_CLOCK,
                   actor: str | None = None) -> UUID:
    now = clock.now()
    actor = actor or process_actor()
    seen: dict[str, UUID] = {}

    def command(session: Session) -> None:
        seen["turn_id"] = session.request_cancel(reason, now, actor=actor)

    store.update_session(session_id, command)
    return seen["turn_id"]


def cancel_paused_turn(store: ChronicleStore, session_id: UUID, reason: str, clock: Clock = SYSTEM_CLOCK,
                       actor: str | None = None) -> UUID | None:
    """A turn waiting for approval has no process running it: cancel it here and now.

    Every unresolved tool call of the open step gets a `cancelled` result, so the model never
    sees a tool_use without its tool_result when the session continues.
    """
    session = store.session(session_id)
    if session.active_turn_id is None:
        return None
    turn = store.turn(session.active_turn_id)
    if turn.status != "awaiting_approval":
        return None
    now = clock.now()
    calls = []
    step = turn.open_step
    if step is not None:
        from chronicle.domain.ids import tool_call_id

        for block in step["response"]["content"]:
            if block.get("type") != "tool_use":
                continue
            call = store.tool_call(tool_call_id(turn.id, step["step"], block["id"]))
            if call.status in ("pending", "awaiting_approval", "approved", "running"):
                call.cancel(reason, now)
            calls.append(call)
        turn.record_tool_results([c.result_block() for c in calls], now)
    turn.cancel(reason, now, actor=actor or process_actor())
    store.update_session(session_id, lambda s: s.end_turn(turn.id, "cancelled", now), turn, *calls)
    return turn.id
