"""A session's live events as Server-Sent Events (`GET /sessions/{id}/events`), derived from its log.

Apart from the routes (runtime/server/api.py) because it is the one part of the server that holds a request open:
it reads the log on from where it stopped, yields each event's JSON line with its position as the SSE id, and
ends when the session has nothing more to do, the client leaves, or the server stops.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from contextlib import contextmanager
from typing import Any, AsyncGenerator, Callable, Iterator
from uuid import UUID

from fastapi.exceptions import RequestValidationError

from chronicle.client import Chronicle
from chronicle.runtime.app import queries
from chronicle.runtime.bounds import LARGEST
from chronicle.runtime.live_from_log import LiveFromLog
from chronicle.runtime.off_loop import off_the_loop

#: Seconds between looks at the log while a stream waits for the next event.
STREAM_POLL_S = 0.2
#: Seconds a stream waits between looks at whether its client has left, when nothing happens.
CLIENT_CHECK_S = 1.0
#: Seconds of silence after which a stream sends an SSE comment (`: keep-alive`): a proxy or load balancer that
#: closes a connection idle for 30-60 s (nginx's proxy_read_timeout is 60 s) then keeps a quiet session's stream open.
KEEPALIVE_S = 15.0
#: What it sends: a comment line, which every SSE client ignores (EventSource fires no event for it).
KEEPALIVE = b": keep-alive\n\n"


def resume_position(last_event_id: str | None) -> int:
    """The log position a reconnecting client's `Last-Event-ID` names (0 without one), checked as `?after=` is: a value
    that is not a whole number from 0 to LARGEST is a 422 naming the header. `-5` was taken as 0 (the whole past sent
    again) while `?after=-3` was refused."""
    if last_event_id is None or not last_event_id.strip():
        return 0
    text = last_event_id.strip()
    why = None
    if not re.fullmatch(r"-?[0-9]{1,30}", text):
        why = "not a log position (a whole number, the id: of the last message received)"
    elif int(text) < 0:
        why = "a log position is 0 or more"
    elif int(text) > LARGEST:
        why = f"a log position is at most {LARGEST}"
    if why is not None:
        raise RequestValidationError([{"type": "value_error", "loc": ("header", "Last-Event-ID"), "msg": why,
                                       "input": last_event_id}])
    return int(text)


def past_the_head(named: str, position: int, head: int) -> str:
    """What a stream asked to start after a position the log has not reached is told (400): such an id was never sent
    by this store (it comes from another, or from before a restore), and the stream used to wait in silence for the
    log to grow past it, dropping every event before."""
    return (f"{named}: log position {position} is past the end of this store's log (its last position is {head}): it "
            "is no id this server sent; reconnect without it (or with ?after=0) to read the session from the start")


class LogHead:
    """The log's head, looked at once every STREAM_POLL_S for all the open streams together.

    Each stream used to look for itself (a thread hop and a query for the head, another for its session, five times
    a second): a hundred viewers of sessions where nothing happened cost the server a third of a core. Now one look
    serves them all, and a stream reads the store only when the head has moved. While no stream is open, nothing
    looks. `stopping` (the server's): once true, every stream is woken to end."""

    def __init__(self, chronicle: Chronicle, interval: float = STREAM_POLL_S,
                 stopping: Callable[[], bool] = lambda: False) -> None:
        self._chronicle = chronicle
        self._interval = interval
        self._stopping = stopping
        self.position: int | None = None
        #: Why the last look failed (a database outage): each waiting stream raises it, as its own read did.
        self._error: BaseException | None = None
        self._moved = asyncio.Event()
        self._looking: asyncio.Task[None] | None = None
        self._followers = 0

    @contextmanager
    def followed(self) -> Iterator[None]:
        self._followers += 1
        try:
            yield
        finally:
            self._followers -= 1

    async def past(self, seen: int, timeout: float) -> int:
        """The head once it is past `seen`, or as it is after `timeout` (a stream then checks on its client)."""
        if self._looking is None or self._looking.done():
            self._looking = asyncio.ensure_future(self._look())
        if self.position is None or self.position == seen:
            moved = self._moved
            try:
                await asyncio.wait_for(moved.wait(), timeout)
            except TimeoutError:
                pass
        if self._error is not None:
            raise self._error
        return seen if self.position is None else self.position

    async def _look(self) -> None:
        while self._followers > 0:
            head: int | None
            try:
                head = await off_the_loop(self._chronicle.store.max_position)
                error = None
            except Exception as exc:  # noqa: BLE001 - told to every stream waiting, which raises it
                head, error = self.position, exc
            if head != self.position or error is not self._error or self._stopping():
                self.position, self._error = head, error
                self._moved.set()
                self._moved = asyncio.Event()
            await asyncio.sleep(self._interval)


#: The answer to one stream more than the limit (503): what it is and what to do.
TOO_MANY_STREAMS = ("the server holds {limit} live event streams already (CHRONICLE_SERVER_MAX_STREAMS); try again later, "
                    "or close a stream that follows a session no one watches")
#: Seconds a client refused a stream is told to wait (`Retry-After`).
STREAM_RETRY_S = 5
#: The fewest streams the default limit allows, however low the descriptor limit.
FEWEST_STREAMS = 8


def stream_limit(setting: int | None) -> int:
    """How many live event streams the server holds open at once: CHRONICLE_SERVER_MAX_STREAMS, else half the soft
    file descriptor limit (`ulimit -n`). Each stream holds a socket for as long as it follows its session; a server
    whose every descriptor was held by streams could accept no connection at all, /healthz's included (asyncio then
    logged `socket.accept() out of system resource` a thousand times a second: runtime/server/accept_flood.py)."""
    if setting is not None:
        return setting
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return 512
    if soft == resource.RLIM_INFINITY or soft <= 0:
        return 512
    return max(FEWEST_STREAMS, soft // 2)


class OpenStreams:
    """How many live event streams the server holds open: `GET /healthz`'s `streams`.

    An operator sees how many clients follow sessions right now (viewers, dashboards), and a count that only grows
    says streams are not let go when their clients leave. A stream counts from its first read of the log until it
    ends, its client leaves (the response stops it) or the server stops, so `open` back at 0 also says that nothing
    is being written to any client any more (a test waits on that instead of sleeping)."""

    def __init__(self, limit: int | None = None) -> None:
        #: Changed on the server's event loop only; /healthz reads it on a request's thread.
        self.open = 0
        #: Streams held at once (`stream_limit`); None: no limit (an app mounted elsewhere sets its own).
        self.limit = limit

    def full(self) -> bool:
        """Whether a new stream would pass the limit: the route answers 503 with Retry-After instead."""
        return self.limit is not None and self.open >= self.limit

    async def counted(self, stream: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
        self.open += 1
        try:
            async for chunk in stream:
                yield chunk
        finally:
            self.open -= 1
            await stream.aclose()

    def row(self) -> dict[str, Any]:
        return {"open": self.open, "limit": self.limit}


async def event_stream(chronicle: Chronicle, sid: str, after: int, follow: bool,
                        disconnected: Callable[[], Any], stopping: Callable[[], bool],
                        log_head: LogHead | None = None, keepalive_s: float = KEEPALIVE_S) -> AsyncGenerator[bytes, None]:
    """SSE of the session's live events after log position `after`; ends after an `agent_end`
    when nothing more is queued or running, at once (after the past) when `follow` is off, and
    when the server is stopping (a server waits for its open requests before it stops).

    Every store read runs off the event loop, which serves every other request and, with the
    worker on, runs turns: a read waiting on the database (an outage being retried for seconds)
    must not hold them. The log is read on from where the last read ended (`LogTail`), so each
    new event costs the stream that event, not the whole session again; and only once `log_head` (shared by the
    server's streams) says the log has moved. The stream still wakes every CLIENT_CHECK_S to see whether its client
    left, which costs no read; a stopping server wakes it at once. After `keepalive_s` with nothing sent, it sends
    KEEPALIVE, so that a quiet stream is not cut by a proxy as an idle connection."""
    heads = log_head or LogHead(chronicle)
    with heads.followed():
        async for chunk in _stream(chronicle, sid, after, follow, disconnected, stopping, heads, keepalive_s):
            yield chunk


async def _stream(chronicle: Chronicle, sid: str, after: int, follow: bool, disconnected: Callable[[], Any],
                  stopping: Callable[[], bool], heads: LogHead, keepalive_s: float) -> AsyncGenerator[bytes, None]:
    store = chronicle.store
    session = await off_the_loop(store.session, UUID(sid))
    spec = session.spec
    derive = LiveFromLog(sid, spec.name, spec.depth, str(session.parent_session_id) if session.parent_session_id else None,
                         str(session.parent_tool_call_id) if session.parent_tool_call_id else None, prefix=spec.prefix,
                         instance=spec.instance)
    tail = await off_the_loop(queries.LogTail, store, sid)
    seen_head = -1
    ended_at = 0
    late: list[dict[str, Any]] = []  # read after the session looked finished: streamed first
    head = await off_the_loop(store.max_position)  # the stream's own first look: the past is sent at once
    checked_at: int | None = None  # the head at which the session was last read: it changes only with the log
    sent_at = time.monotonic()  # when the stream last sent anything (an event or KEEPALIVE)
    while True:
        if head != seen_head or late:
            seen_head = head
            entries = late + await off_the_loop(tail.read)
            late = []
            items = [item for item in derive.feed(entries) if item.position > after]
            for index, item in enumerate(items):
                # One log event may give several live events (agent_start, turn_start, status_change):
                # only the last of them carries the position as its id, so a client that drops in
                # between resumes from the position before and is sent the whole group again.
                last_of_position = index + 1 == len(items) or items[index + 1].position != item.position
                event_id = f"id: {item.position}\n" if last_of_position else ""
                yield f"{event_id}data: {json.dumps(item.json_line(), ensure_ascii=False)}\n\n".encode()
                sent_at = time.monotonic()
                if item.event.type == "agent_end":
                    ended_at = item.position
                # A write does not yield to the event loop: without this, a client that left during
                # a long replay was written to for every event left in the batch, dead, with a
                # warning from asyncio for each, while every other request waited. Here the loop
                # learns of the lost connection, and the response stops this stream.
                await asyncio.sleep(0)
            after = max(after, entries[-1]["position"] if entries else after)
        if not follow:
            return
        if ended_at and head != checked_at:
            checked_at = head
            current = await off_the_loop(_current_session, store, UUID(sid))
            if current.active_turn_id is None and not current.queue:
                # The session is read after its entries, and turns run beside this stream: it may have
                # finished a turn whose last events were not streamed yet. End only if none came since.
                late = await off_the_loop(tail.read)
                if not late:
                    return
                checked_at = None  # read again once those are streamed
                continue
        if stopping() or await disconnected():
            return
        if time.monotonic() - sent_at >= keepalive_s:
            yield KEEPALIVE
            sent_at = time.monotonic()
        head = await heads.past(seen_head, min(CLIENT_CHECK_S, keepalive_s))


def _current_session(store: Any, sid: UUID) -> Any:
    return store.session(sid, copy=False)  # only read
