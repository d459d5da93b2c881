"""Answers sent back out (seed 001: "notifies via channel"): each turn a channel input started
is POSTed, once it ends, to the channel's `reply_url`, and what became of it is recorded.

Whichever process ran the turn (this server's worker or any `chronicle worker`), the server's
outbox finds it from the log: a session's `input_origins` name the channel inputs, the turn an
input started has a derived id (domain/ids.make_turn_id), and `replies` say which were sent. A
turn that ended without a ReplyDelivered/ReplyFailed is due, so a reply is made after a restart
too, and once: the event is recorded right after the POST (a crash between the two is the one
case that sends it again). The receiver is tried a few times; a receiver that keeps failing is a
ReplyFailed event, and never touches the turn, which has ended already. The recorded receiver is
the URL without its secrets: no user or password, query values and token-like path parts cut out.

Any number of servers may run on one database with the same channels: before it POSTs, a server
takes the turn's reply lease (domain/ids.reply_lease_id, a SessionLease of runtime/leases.py) and
looks again for the reply's record, so of two that find the same reply due one sends it, and the
other passes it by (and looks again while the lease is held elsewhere). That second look reads only
the session's events appended after the version the first look saw (`settled_since`), not the
session again. The lease outlives one delivery with all its retries; a server that dies holding it
leaves it to run out, and another server sends the reply then (the same single case: a crash between
the POST and its record).

A reply costs two lease events, written in one transaction: the lease's Created and Acquired (its
first version: of two servers claiming a fresh lease, the second's write collides on that slot,
which is what makes the claim exclusive; folding the holder into Created would be a new version of
an event every store holds, for one row). It is not released: once the reply is recorded the turn is
settled, and a server that found it due before that either meets the held lease and looks again at
its next pass, where the record shows, or takes the lease after it ran out and finds the record then.
A release would be a third event guarding nothing, and after a failed record (a lost database) a
held lease is what keeps another server from posting at once what may have been posted.

The sessions looked at are those of the reply index's inputs whose reply is still due, read from
the outbox's checkpoint (pending_replies.py), and those this process routed to: not every session.

Whether an input wants a reply was decided when it was queued (its origin's `reply`), so adding
`reply_url` to a channel later does not send the answers of every turn it ever started. An input
`chronicle import` brought is not answered here at all: its reply is the source store's
(runtime/import_log.py).

The findings of routines that notify a channel go out the same way (notify.py): with the same
payload plus `routine`, recorded by the same events.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable
from urllib.parse import parse_qsl, urlsplit
from uuid import UUID

import httpx

from chronicle.domain.errors import DomainError
from chronicle.domain.ids import reply_lease_id
from chronicle.domain.ids import turn_id as make_turn_id
from chronicle.domain.session import Session
from chronicle.runtime.clock import SYSTEM_CLOCK, Clock
from chronicle.runtime.environment import DEFAULT_REPLY_BACKOFF_S
from chronicle.runtime.leases import acquire, holder_name
from chronicle.runtime.secret_scan import scanner_for
from chronicle.runtime.shred_marks import forgotten_cause
from chronicle.runtime.store import ChronicleStore, NotFound

from .channels import ChannelConfig
from .notify import Notices, notified
from .outbox_progress import OutboxProgress
from .pending_replies import PendingReplies

log = logging.getLogger("chronicle.server")

#: Attempts per reply, and the waits between them (seconds): CHRONICLE_SERVER_REPLY_BACKOFF_S sets these.
ATTEMPTS = 3
BACKOFF_S = DEFAULT_REPLY_BACKOFF_S
#: Seconds one POST may take.
TIMEOUT_S = 10.0
#: Seconds between looks at the log; and between full scans of the reply index (a reply due in a
#: session this process has not routed to, e.g. one queued before a restart or by another server).
POLL_S = 0.5
FULL_SCAN_S = 60.0
#: Statuses worth another attempt: the receiver may be better in a moment.
RETRIABLE = {408, 425, 429, 500, 502, 503, 504}
#: Seconds a server holds a reply it is sending: longer than one delivery with every retry
#: (ATTEMPTS × TIMEOUT_S + the backoffs, about 33 s), so no other server takes it over mid-send,
#: and short enough that a reply whose server died goes out a minute later.
REPLY_LEASE_S = 60.0


def safe_receiver(url: str) -> str:
    """The URL as it may be recorded: scheme, host, port and path, with no user or password, the
    query's values replaced by [REDACTED] and any token-like part of the path cut out by the secret scan."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    scan = scanner_for(None)
    path = "/".join(scan.text(segment).value for segment in parts.path.split("/"))  # each part: "/" is in a token's alphabet
    query = "&".join(f"{key}=[REDACTED]" for key, _ in parse_qsl(parts.query, keep_blank_values=True))
    return f"{parts.scheme}://{netloc}{path}" + (f"?{query}" if query else "")


@dataclass(frozen=True)
class Due:
    session_id: UUID
    turn_id: UUID
    channel: str
    senders: list[str]
    payload: dict[str, Any]
    #: The routine whose run's findings these are (notify.py); None for a channel input's answer.
    routine: str | None = None
    #: The session's version when this was found due: the check made under the lease reads only what
    #: was appended after it (`settled_since`); None reads the session's events from its start.
    version: int | None = None


@dataclass(frozen=True)
class Outcome:
    delivered: bool
    attempts: int
    status: int | None
    error: str | None


def due_replies(store: ChronicleStore, session_id: UUID, channels: dict[str, ChannelConfig]) -> list[Due]:
    """The ended turns of the session whose channel input wants a reply not recorded yet."""
    try:
        session = store.session(session_id, copy=False)  # only read
    except NotFound:
        return []
    found = []
    for input_id, origin in list(session.input_origins.items()):
        config = channels.get(origin.get("channel", ""))
        if not origin.get("reply") or config is None or config.reply_url is None:
            continue
        turn_id = make_turn_id(session.id, input_id)
        if str(turn_id) in session.replies or turn_id not in session.turns or session.active_turn_id == turn_id:
            continue  # sent already, not started yet, or still running
        turn = store.turn(turn_id)
        senders = list(origin["senders"])
        found.append(Due(session.id, turn_id, origin["channel"], senders, {
            "channel": origin["channel"], "sender": senders[0], "senders": senders, "session_id": str(session.id),
            "turn_id": str(turn_id), "status": turn.status,
            "text": turn.final_text if turn.status == "completed" else None,
        }, version=session.version))
    return found


def settled_since(store: ChronicleStore, due: Due) -> bool:
    """Whether the reply was recorded (or the session erased) after `due` was found: read from the
    session's events appended since the version it was found at, not by loading the session again."""
    try:
        if (check := getattr(store.mapper, "check_aggregate", None)) is not None:
            check(due.session_id)  # forgotten here or, as this process has seen, elsewhere
        for event in store.events.get(due.session_id, gt=due.version):
            if isinstance(event, (Session.ReplyDelivered, Session.ReplyFailed)) and event.turn_id == due.turn_id:
                return True
    except Exception as exc:  # noqa: BLE001 - an erased session's events no longer decode
        if forgotten_cause(exc) is not None:
            return True  # erased meanwhile: nothing is sent for it
        raise
    return False


def post(url: str, payload: dict[str, Any], attempts: int = ATTEMPTS, backoff: tuple[float, ...] = BACKOFF_S,
         sleep: Callable[[float], None] = time.sleep) -> Outcome:
    """POST the reply, again after a connection failure or a status worth retrying. The error said
    is the exception's class or the status, never its text: httpx puts the URL (and its token) there."""
    status: int | None = None
    error: str | None = None
    tried = 0
    with httpx.Client(timeout=TIMEOUT_S, follow_redirects=False) as client:
        for tried in range(1, attempts + 1):
            try:
                answer = client.post(url, json=payload)
                status = answer.status_code
                if 200 <= status < 300:
                    return Outcome(True, tried, status, None)
                error = f"the receiver answered HTTP {status}"
                if status not in RETRIABLE:
                    break
            except httpx.HTTPError as exc:
                status, error = None, f"no answer from the receiver ({type(exc).__name__})"
            if tried < attempts:
                sleep(backoff[min(tried - 1, len(backoff) - 1)])
    return Outcome(False, tried, status, error)


class Outbox:
    """The server's loop that sends due replies, on a thread of its own (a POST may take seconds)."""

    def __init__(self, store: ChronicleStore, channels: dict[str, ChannelConfig], touched: set[UUID],
                 sender: Callable[[str, dict[str, Any]], Outcome] = post, workspace: Path | None = None,
                 holder: str | None = None, clock: Clock = SYSTEM_CLOCK) -> None:
        """`workspace`: whose routines' findings this server posts (their `notify` names its channels).
        `holder`: who this server is in the reply leases it takes (`host:pid:nonce` by default);
        `clock`: the leases' (a test's own moves past a lease's end without waiting for it)."""
        self.store, self.channels, self.touched, self.sender = store, channels, touched, sender
        self.holder, self.clock = holder or holder_name(), clock
        self.workspace = workspace.resolve() if workspace is not None else None
        self.notices = Notices(store, self.workspace) if self.workspace is not None else None
        #: A reply was passed by because another server held its lease: look again at the next poll
        #: even if the log has not moved (that server may die, and its lease run out).
        self.held_elsewhere = False
        self.stopping = threading.Event()
        self.thread: threading.Thread | None = None
        self.watched: set[UUID] = set()
        self.seen_head = -1
        self.scanned_at: float | None = None  # none yet: the first pass scans the reply index
        self.pending = PendingReplies(store)
        self.progress = OutboxProgress()  # how far it has looked: /healthz's `outbox`

    def notifying(self) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
        """Which routines' findings this server posts, by channel, and which it cannot (notify.notified)."""
        return notified(self.workspace, self.channels) if self.workspace is not None else ({}, {})

    @property
    def wanted(self) -> bool:
        return any(c.reply_url for c in self.channels.values())

    def start(self) -> None:
        if self.wanted:
            self.thread = threading.Thread(target=self._run, name="chronicle-outbox", daemon=True)
            self.thread.start()

    def stop(self, wait_s: float) -> None:
        """Stop after one last pass (the turns the worker finished while draining), or after `wait_s`."""
        self.stopping.set()
        if self.thread is not None:
            self.thread.join(wait_s)

    def status(self) -> dict[str, object]:
        """/healthz's `outbox`: whether it runs, and how far it has looked (outbox_progress.py)."""
        running = self.thread is not None and self.thread.is_alive() and not self.stopping.is_set()
        return self.progress.row(running)

    def _run(self) -> None:
        while True:
            last = self.stopping.is_set()
            try:
                self.pass_once()
                self.progress.completed(self.seen_head)
            except Exception as exc:  # noqa: BLE001 - a lost database: try again at the next look; the log says why
                log.exception("the outbox could not look for replies")
                self.progress.failed(exc)
            if last:
                return
            self.stopping.wait(POLL_S)

    def pass_once(self) -> int:
        """Send every due reply; returns how many were recorded."""
        head = self.store.max_position()
        now = time.monotonic()
        full = self.scanned_at is None or now - self.scanned_at >= FULL_SCAN_S
        if head == self.seen_head and not full and not self.held_elsewhere:
            return 0
        self.seen_head = head
        self.held_elsewhere = False
        if full:  # every session with a channel's reply due, from the log: after a restart too
            self.scanned_at = now
            self.watched = self.pending.sessions()
        self.watched |= self.touched
        sent = 0
        found = [due for sid in sorted(self.watched) for due in due_replies(self.store, sid, self.channels)]
        if found:  # read only when something is due: the turns an import brought, whose replies are another store's
            imported = self.pending.imports.unanswered()
            for due in found:
                if due.turn_id not in imported:
                    sent += self.deliver(due)
        for due in self.notices.due(self.channels) if self.notices is not None else []:
            sent += self.deliver(due)
        self.pending.let_go()
        return sent

    def deliver(self, due: Due) -> bool:
        """Deliver the reply under its lease; False if another server holds it, or recorded it meanwhile."""
        key = reply_lease_id(due.turn_id)
        if not acquire(self.store, due.session_id, self.holder, REPLY_LEASE_S, self.clock, key=key):
            self.held_elsewhere = True  # another server is sending it
            return False
        # Not released after: the turn's reply is settled once recorded, so the lease has nothing left
        # to guard, and it runs out by itself (see the module's docstring).
        if settled_since(self.store, due):
            return False  # found due before another server recorded it, and claimed after its lease ran out
        self._send(due)
        return True

    def _send(self, due: Due) -> None:
        url = self.channels[due.channel].reply_url
        assert url is not None
        outcome = self.sender(url, due.payload)
        receiver = safe_receiver(url)
        try:
            self.store.update_session(due.session_id, lambda s: s.record_reply(
                due.turn_id, due.channel, due.senders, receiver, outcome.delivered, outcome.attempts, outcome.status,
                outcome.error, SYSTEM_CLOCK.now(), routine=due.routine))
        except DomainError:
            # Recorded by another server that took the lease after it ran out under this one (a
            # delivery slower than REPLY_LEASE_S): the receiver may have had it twice, which the log cannot show.
            log.warning("the reply of turn %s to channel %s was recorded by another server while this one sent it: "
                        "it may have been sent twice", due.turn_id, due.channel)
            return
        if not outcome.delivered:
            what = f"findings of routine {due.routine}" if due.routine else "reply"
            log.warning("%s of turn %s to channel %s failed: %s", what, due.turn_id, due.channel, outcome.error)
