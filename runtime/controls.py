"""Steering and cancel across processes: requests are Session events, the running loop polls.

`chronicle steer` and `chronicle cancel` may run in another process (or on another machine)
than the loop running the turn, so a request cannot be a signal or a callback: it is recorded
on the Session, and the running loop notices it. Cancel is polled by a background task every
few hundred milliseconds; steering is read at the loop's safe points, between tool calls,
where it can be acted on.

The session is read again only when something may have changed: a probe
(runtime/control_probes.py) answers that with a lookup of its newest version on SQLite, and a
LISTEN that steer and cancel NOTIFY on PostgreSQL.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass
from typing import Any
from uuid import UUID, uuid4

from eventsourcing.persistence import IntegrityError

from chronicle.domain.content import TextBlock
from chronicle.domain.session import Session

from .actor import recorded_actor
from .clock import SYSTEM_CLOCK, Clock
from .control_probes import ControlProbe, Listener, VersionProbe, notify_control, turn_probe
from .off_loop import off_the_loop
from .store import ChronicleStore

POLL_S = 0.25
#: How long a turn's end waits for a cancel check still running on its thread.
STOP_WAIT_S = 1.0
STEERING_SKIP_REASON = "the user sent a steering message before this tool started, so it was not run"

class SessionControls:
    """A running loop's view of its session's steering and cancel requests: the session is
    read again only when the probe says it may have changed."""

    def __init__(self, store: ChronicleStore, session_id: UUID, probe: ControlProbe | None = None) -> None:
        self.store, self.session_id = store, session_id
        self.probe = probe or turn_probe(store, session_id)
        self._session: Session | None = None
        self._lock = threading.Lock()

    def session(self) -> Session:
        # The cancel watcher asks from a thread of its own (runtime/off_loop.py) and the loop from
        # its safe points, so the probe's state and the cached session are changed under a lock.
        with self._lock:
            if self._session is None or self.probe.changed():
                self._session = self.probe.read(lambda: self.store.session(self.session_id, copy=False))
            return self._session

    def steering(self, turn_id: UUID) -> Steering | None:
        return _steering_of(self.session(), turn_id)

    def cancel_reason(self, turn_id: UUID) -> str | None:
        request = self.session().cancel_requested
        if request and request["turn_id"] == turn_id:
            return str(request["reason"])
        return None

    def close(self) -> None:
        self.probe.close()


#: Sessions whose controls a store keeps (a PostgreSQL listener each); the oldest is let go.
KEPT = 8


#: The loop's thread and the cancel watcher's (runtime/off_loop.py) both look controls up.
_KEPT_LOCK = threading.Lock()


def controls_of(store: ChronicleStore, session_id: UUID) -> SessionControls:
    """One SessionControls per store and running session, reused across its safe points."""
    with _KEPT_LOCK:
        cache: dict[UUID, SessionControls] = store.__dict__.setdefault("_session_controls", {})
        if session_id not in cache:
            while len(cache) >= KEPT:
                cache.pop(next(iter(cache))).close()
            cache[session_id] = SessionControls(store, session_id)
        return cache[session_id]


def release_controls(store: ChronicleStore, session_id: UUID) -> None:
    """The turn is over: close the session's listener, if any."""
    with _KEPT_LOCK:
        found = store.__dict__.get("_session_controls", {}).pop(session_id, None)
    if found is not None:
        found.close()


class CancelWatcher:
    """Polls the store while a turn runs; cancels the turn's task when a cancel is requested.

    `just_started`: this process began the turn a moment ago, so no cancel can be waiting for it
    yet (a cancel names the running turn, which did not exist before), and the first check comes
    after one `poll_s` like every later one. Checking at once had the watcher's thread ask the
    store while the loop read the earlier turns: on PostgreSQL the pool made a second connection for
    it (a login, then the save function planned again on that server process: ≈ 6 ms of a
    50-step turn's 83 here), and most short turns end before a first poll would find anything.
    A turn found in flight (resumed, reopened) is checked at once: a cancel may have been
    recorded while no process ran it."""

    def __init__(
        self, store: ChronicleStore, session_id: UUID, turn_id: UUID, task: asyncio.Task, poll_s: float = POLL_S,
        just_started: bool = False,
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.turn_id = turn_id
        self.task = task
        self.poll_s = poll_s
        self.just_started = just_started
        self.reason: str | None = None
        self._watching: asyncio.Task | None = None
        #: Set while no check runs on its thread; `stop` waits (a little) for the one that does.
        self._checked = threading.Event()
        self._checked.set()

    def start(self) -> None:
        self._watching = asyncio.ensure_future(self._watch())

    async def stop(self) -> None:
        """The watch first, then the check in flight on its thread, for up to `STOP_WAIT_S`: a
        healthy store answers in milliseconds, after which the store may be closed and its files
        removed (a replay's scratch store) with nothing still reading them. A check held by a
        store outage is left to end on its own, its answer going nowhere: the turn's end never
        waits out a connection retry."""
        if self._watching is not None and not self._watching.done():
            self._watching.cancel()
            try:
                await self._watching
            except (asyncio.CancelledError, Exception):  # noqa: BLE001 - the watcher's end never matters
                pass
        deadline = time.monotonic() + STOP_WAIT_S
        while not self._checked.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.002)
        release_controls(self.store, self.session_id)

    def honoured(self) -> None:
        """The turn's end for the cancel request is recorded: wake whoever waits for it (`chronicle
        cancel`, chat's /stop, `cancel()`; `TurnEndWait`) at once. SQLite waiters look the version up."""
        try:
            notify_control(self.store, self.session_id)
        except Exception:  # noqa: BLE001 - the waiter's own look finds the end a little later
            pass

    def requested(self) -> str | None:
        self._checked.clear()
        try:
            return self._cancel_reason()
        except Exception:  # noqa: BLE001 - a store hiccup must not cancel or crash the turn
            return None
        finally:
            self._checked.set()

    def _cancel_reason(self) -> str | None:
        return controls_of(self.store, self.session_id).cancel_reason(self.turn_id)

    async def _watch(self) -> None:
        if self.just_started:
            await asyncio.sleep(self.poll_s)
        while True:
            reason = await off_the_loop(self.requested)
            if reason is not None:
                self.reason = reason
                self.task.cancel()
                return
            await asyncio.sleep(self.poll_s)


#: How often a waiter for a turn's end looks: the session's version on SQLite (a lookup in the
#: file); on PostgreSQL the session is read this often only if no notification came.
END_LOOK_S = 0.02
END_FALLBACK_S = 0.25


class TurnEndWait:
    """Waits for a session to stop running a turn another process runs (after a cancel request),
    waking at once on what the cancel paths already give: on PostgreSQL the NOTIFY the running loop
    sends once its cancelled end is recorded (`CancelWatcher.honoured`), heard on a LISTEN connection
    of the wait's own (opened before the request is recorded, so the notification cannot be missed;
    not the store's shared one, whose lock running turns' safe points take); on SQLite the session's
    newest version, one indexed lookup every `END_LOOK_S`. The session is read only when something
    may have changed; the full read every 0.1 s this replaced answered no sooner and cost more."""

    def __init__(self, store: ChronicleStore, session_id: UUID) -> None:
        self.store, self.session_id = store, session_id
        self.listener: Listener | None = None
        if store.backend == "postgresql":
            try:
                self.listener = Listener(store)
                self.listener.counts[session_id.hex] = 0
            except Exception:  # noqa: BLE001 - no listener (connection limit): the version lookup still works
                self.listener = None
        self.probe = VersionProbe(store, session_id)

    def ended(self, turn_id: UUID, wait_s: float) -> bool:
        """True once the session no longer runs `turn_id`; False if it still does after `wait_s`."""
        deadline = time.monotonic() + wait_s
        heard = True  # the listener's connection answers (it may be lost, and is then looked past)
        while True:
            if (self.listener is not None and heard) or self.probe.changed():
                if self.probe.read(lambda: self.store.session(self.session_id)).active_turn_id != turn_id:
                    return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self.listener is not None:
                # Woken by the notification, or a look after END_FALLBACK_S: a loop may end the turn
                # otherwise (completed before it saw the request), or run code without the NOTIFY.
                heard = self.listener.count(self.session_id, wait_s=min(left, END_FALLBACK_S)) is not None
            if self.listener is None or not heard:
                time.sleep(min(left, END_LOOK_S))

    def close(self) -> None:
        if self.listener is not None:
            self.listener.close()
            self.listener = None


@dataclass(frozen=True)
class Steering:
    steer_ids: list[str]
    texts: list[str]
    skip_unstarted: bool

    def blocks(self) -> list[TextBlock]:
        return [TextBlock(text=text) for text in self.texts]


def pending_steering(store: ChronicleStore, session_id: UUID, turn_id: UUID) -> Steering | None:
    """Steering recorded for this turn and not yet delivered; None if there is none."""
    return controls_of(store, session_id).steering(turn_id)


def _steering_of(session: Session, turn_id: UUID) -> Steering | None:
    items = [s for s in session.steering if s["turn_id"] == turn_id]
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

    def row(self) -> dict[str, Any]:
        """`steer --json`: the CLI, the library and the server answer with this one shape."""
        return {"session_id": str(self.session_id), "steer_id": self.steer_id, "outcome": self.outcome,
                "turn_id": str(self.turn_id) if self.turn_id else None}


def steer(store: ChronicleStore, session_id: UUID, text: str, wait_batch: bool = False, clock: Clock = SYSTEM_CLOCK,
          actor: str | None = None, turn_id: UUID | None = None) -> SteerResult:
    """`actor`: who steers (default: this process's user@host; a server passes its caller).
    `turn_id`: steer only that turn; DomainError (nothing recorded) if another one, or none, runs."""
    steer_id = uuid4().hex
    actor = recorded_actor(actor)
    now = clock.now()
    seen: dict[str, Any] = {}

    def command(session: Session) -> None:
        from .secret_scan import scanned_text  # secrets cut out before the message is recorded

        said = scanned_text(session, f"steering {steer_id}", text, session.spec.workspace, now)
        seen["outcome"] = session.steer(steer_id, said, now, wait_batch=wait_batch, actor=actor, turn_id=turn_id)
        seen["turn_id"] = session.active_turn_id

    store.update_session(session_id, command)
    notify_control(store, session_id)
    return SteerResult(seen["outcome"], session_id, seen["turn_id"], steer_id)


def request_cancel(store: ChronicleStore, session_id: UUID, reason: str, clock: Clock = SYSTEM_CLOCK,
                   actor: str | None = None) -> UUID:
    """The running turn's id; a request already pending for it records nothing (`Session.request_cancel`)."""
    return record_cancel_request(store, session_id, reason, clock, actor)[0]


def record_cancel_request(store: ChronicleStore, session_id: UUID, reason: str, clock: Clock = SYSTEM_CLOCK,
                          actor: str | None = None) -> tuple[UUID, bool]:
    """The running turn's id, and whether its cancel was already pending (then nothing is recorded
    and no one is woken: the running loop has been told once already)."""
    now = clock.now()
    actor = recorded_actor(actor)
    seen: dict[str, Any] = {}

    def command(session: Session) -> None:
        seen["already"] = session.cancel_pending(reason)
        seen["turn_id"] = session.request_cancel(reason, now, actor=actor)

    store.update_session(session_id, command)
    if not seen["already"]:
        notify_control(store, session_id)
    return seen["turn_id"], seen["already"]


def cancel_paused_turn(store: ChronicleStore, session_id: UUID, reason: str, clock: Clock = SYSTEM_CLOCK,
                       actor: str | None = None) -> UUID | None:
    """A turn waiting for approval has no process running it: cancel it here and now.

    Every unresolved tool call of the open step gets a `cancelled` result, so the model never
    sees a tool_use without its tool_result when the session continues. Another process may
    answer the approval meanwhile (approve, deny, resume): the write then conflicts, and the
    cancel is decided again on what it wrote (a turn that runs again is cancelled as running ones are).
    """
    for _ in range(CANCEL_ATTEMPTS):
        try:
            return _cancel_paused(store, session_id, reason, clock, actor)
        except IntegrityError:
            continue
    raise RuntimeError(f"session {session_id}: its paused turn kept changing under {CANCEL_ATTEMPTS} attempts to cancel it")


#: Tries of a paused turn's cancel while other processes answer its approval.
CANCEL_ATTEMPTS = 10


def _cancel_paused(store: ChronicleStore, session_id: UUID, reason: str, clock: Clock, actor: str | None) -> UUID | None:
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
        turn.close_step(calls, now)
    turn.cancel(reason, now, actor=recorded_actor(actor))
    store.update_session(session_id, lambda s: s.end_turn(turn.id, now), turn, *calls)
    return turn.id
