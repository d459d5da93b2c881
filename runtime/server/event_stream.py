"""A session's live events as Server-Sent Events (`GET /sessions/{id}/events`), derived from its log.

Apart from the routes (runtime/server/api.py) because it is the one part of the server that holds a request open:
it reads the log on from where it stopped, yields each event's JSON line with its position as the SSE id, and
ends when the session has nothing more to do, the client leaves, or the server stops.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, AsyncGenerator, Callable
from uuid import UUID

from chronicle.client import Chronicle
from chronicle.runtime.app import queries
from chronicle.runtime.live_from_log import LiveFromLog
from chronicle.runtime.off_loop import off_the_loop

#: Seconds between looks at the log while a stream waits for the next event.
STREAM_POLL_S = 0.2


class OpenStreams:
    """How many live event streams the server holds open: `GET /healthz`'s `streams`.

    An operator sees how many clients follow sessions right now (viewers, dashboards), and a count that only grows
    says streams are not let go when their clients leave. A stream counts from its first read of the log until it
    ends, its client leaves (the response stops it) or the server stops, so `open` back at 0 also says that nothing
    is being written to any client any more (a test waits on that instead of sleeping)."""

    def __init__(self) -> None:
        #: Changed on the server's event loop only; /healthz reads it on a request's thread.
        self.open = 0

    async def counted(self, stream: AsyncGenerator[bytes, None]) -> AsyncGenerator[bytes, None]:
        self.open += 1
        try:
            async for chunk in stream:
                yield chunk
        finally:
            self.open -= 1
            await stream.aclose()

    def row(self) -> dict[str, Any]:
        return {"open": self.open}


async def event_stream(chronicle: Chronicle, sid: str, after: int, follow: bool,
                        disconnected: Callable[[], Any], stopping: Callable[[], bool]) -> AsyncGenerator[bytes, None]:
    """SSE of the session's live events after log position `after`; ends after an `agent_end`
    when nothing more is queued or running, at once (after the past) when `follow` is off, and
    when the server is stopping (a server waits for its open requests before it stops).

    Every store read runs off the event loop, which serves every other request and, with the
    worker on, runs turns: a read waiting on the database (an outage being retried for seconds)
    must not hold them. The log is read on from where the last read ended (`LogTail`), so each
    new event costs the stream that event, not the whole session again."""
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
    while True:
        head = await off_the_loop(store.max_position)
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
        current = await off_the_loop(_current_session, store, UUID(sid))
        if ended_at and current.active_turn_id is None and not current.queue:
            # The session is read after its entries, and turns run beside this stream: it may have
            # finished a turn whose last events were not streamed yet. End only if none came since.
            late = await off_the_loop(tail.read)
            if not late:
                return
            continue
        if stopping() or await disconnected():
            return
        await asyncio.sleep(STREAM_POLL_S)


def _current_session(store: Any, sid: UUID) -> Any:
    return store.session(sid, copy=False)  # only read
