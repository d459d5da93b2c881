"""asyncio's `socket.accept() out of system resource`, said once in a while rather than a thousand times a second.

A server at its file descriptor limit (`ulimit -n`, every descriptor held by open event streams, say) cannot accept a
connection; asyncio logs that, with its traceback, stops listening for a second and tries again, and each try logged
it again, for every listening socket: about 1,000 lines a second, 10 GB of log a day, while /healthz could not be
reached to tell anyone. `chronicle serve` puts this filter on the `asyncio` logger: the first such line is logged, then
at most one every `every_s` seconds, saying how many it held back; every other asyncio line passes untouched.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

#: How asyncio's line begins (selector_events.BaseSelectorEventLoop._accept_connection).
ACCEPT_FAILED = "socket.accept() out of system resource"
#: Seconds between two such lines in the log.
EVERY_S = 30.0
#: What the line adds: why it happens and what cures it.
ADVICE = ("the server is at its file descriptor limit and cannot accept connections: raise `ulimit -n` (LimitNOFILE), "
          "or lower CHRONICLE_SERVER_MAX_STREAMS")


class AcceptFailures(logging.Filter):
    def __init__(self, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.every_s, self.clock = every_s, clock
        self.said_at: float | None = None
        self.held = 0

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(ACCEPT_FAILED):
            return True
        now = self.clock()
        if self.said_at is not None and now - self.said_at < self.every_s:
            self.held += 1
            return False
        exc = record.exc_info[1] if record.exc_info else None
        cause = f" ({exc})" if exc is not None else ""
        since = (f"; {self.held} more in the last {now - self.said_at:.0f} s not logged"
                 if self.said_at is not None and self.held else "")
        record.msg, record.args = f"{ACCEPT_FAILED}{cause}: {ADVICE}{since} (said at most every {self.every_s:g} s)", ()
        record.exc_info, record.exc_text = None, None  # the same traceback each time: asyncio's accept, told above
        self.said_at, self.held = now, 0
        return True


def quiet_accept_failures(every_s: float = EVERY_S) -> AcceptFailures:
    """Put the filter on the `asyncio` logger (once per process) and return it."""
    logger = logging.getLogger("asyncio")
    for existing in logger.filters:
        if isinstance(existing, AcceptFailures):
            return existing
    added = AcceptFailures(every_s)
    logger.addFilter(added)
    return added
