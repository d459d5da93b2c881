"""A server that is stopping but has not stopped: draining.

A supervisor (systemd, Kubernetes) sends SIGTERM and waits; a load balancer watches /healthz. uvicorn's own shutdown
closes the port first, so while the worker finished its turns both saw a server that was down, not one on its way
out. Draining keeps the port: work that would start a turn here (a new session, an input, a webhook) is refused with
503 and `Retry-After`, /healthz answers 503 `draining` (a balancer takes the server out of rotation), the reads and
the live streams go on, and the worker finishes the turns in hand. Once they have ended, or the limit has passed,
the server stops (`chronicle serve`: runtime/cli/serve_drain.py; an app mounted elsewhere drains in its lifespan's
end, its host having closed the port already).
"""

from __future__ import annotations

import math
import threading
import time
from typing import Any, Callable

from fastapi import HTTPException

from chronicle.runtime.app.worker import Worker

#: Seconds a stopping server gives its worker's turns in hand by default (`serve --drain-s`); a turn still running
#: then is left to its lease: another worker, or the server once restarted, resumes it.
DRAIN_S = 30.0

REFUSED = ("the server is stopping (draining: it finishes the turns in hand and takes no new work); send this to "
           "another server, or again once this one has restarted")


class Drain:
    """Whether the server drains, since when, and whether its worker has finished: read by the routes (on the event
    loop and its threads), begun once by the first signal or by the lifespan's end."""

    def __init__(self, limit_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit_s, self.clock = limit_s, clock
        self.began_at: float | None = None
        self.worker: Worker | None = None
        self.thread: threading.Thread | None = None
        #: Called once when the drain begins (the server flushes its channels' held bursts: nothing waits in memory).
        self.on_begin: Callable[[], Any] = lambda: None

    def attach(self, worker: Worker, thread: threading.Thread) -> None:
        """The server's worker, once started; one started after a signal already began the drain drains at once."""
        self.worker, self.thread = worker, thread
        if self.began_at is not None:
            worker.drain()

    def begin(self) -> bool:
        """Stop taking work; True the first time."""
        if self.began_at is not None:
            return False
        self.began_at = self.clock()
        if self.worker is not None:
            self.worker.drain()
        self.on_begin()
        return True

    @property
    def draining(self) -> bool:
        return self.began_at is not None

    def in_hand(self) -> int:
        return len(self.worker.tasks) if self.worker is not None and not self.finished() else 0

    def finished(self) -> bool:
        """The worker has stopped (its turns in hand ended), or there is none."""
        return self.thread is None or not self.thread.is_alive()

    def left_s(self) -> float:
        """Seconds until the limit (the whole limit before the drain begins)."""
        if self.began_at is None:
            return self.limit_s
        return max(0.0, self.began_at + self.limit_s - self.clock())

    def row(self) -> dict[str, Any]:
        """/healthz's `draining`, for a caller with the token: the sessions still in hand and the seconds left."""
        return {"in_hand": self.in_hand(), "left_s": round(self.left_s(), 1)}

    async def refuse_new_work(self) -> None:
        """The routes that start a turn here, while draining: 503 (`code` 1, as the other unavailable answers), and
        `Retry-After` in whole seconds: when this server will have stopped, at the latest."""
        if self.began_at is not None:
            raise HTTPException(status_code=503, detail=REFUSED, headers={"Retry-After": str(max(1, math.ceil(self.left_s())))})
