"""How far the server's outbox (outbox.py) has looked: `GET /healthz`'s `outbox`.

An operator's question is whether the replies and findings this server owes are being looked for: a
count of passes that keeps growing says the outbox is alive, `position` says how far into the log its
last pass read (compare it with the store's head), and `error` says why the last attempt failed (a
lost database) while the passes stand still.

It also says when something has been looked at: every pass reads the log up to its head first and
POSTs what is due before it ends, so once `passes` has grown by two since a moment, a whole pass
began after it. What was not sent by then is not due (a test waits on this rather than sleeping).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from chronicle.runtime.clock import SYSTEM_CLOCK
from chronicle.runtime.redaction import redact_secrets


@dataclass(frozen=True)
class Looked:
    #: Passes completed since the server started.
    passes: int = 0
    #: The log position the last completed pass read through (the store's head when it began).
    position: int | None = None
    at: datetime | None = None
    #: Why the last attempt failed, one line; None once a pass completes again.
    error: str | None = None


class OutboxProgress:
    """Written by the outbox's thread after each pass, read by /healthz on a request's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._looked = Looked()

    def completed(self, position: int) -> None:
        with self._lock:
            self._looked = Looked(self._looked.passes + 1, position, SYSTEM_CLOCK.now(), None)

    def failed(self, exc: BaseException) -> None:
        said = redact_secrets((str(exc).strip().splitlines() or [""])[0])  # a receiver's or the store's words: no secret
        with self._lock:
            self._looked = Looked(self._looked.passes, self._looked.position, self._looked.at,
                                  f"{type(exc).__name__}: {said}" if said else type(exc).__name__)

    @property
    def looked(self) -> Looked:
        with self._lock:
            return self._looked

    def row(self, running: bool) -> dict[str, Any]:
        """`running`: whether the outbox has anything to send to (a channel with reply_url) and is not stopped."""
        looked = self.looked
        return {"running": running, "passes": looked.passes, "position": looked.position,
                "last_pass_at": looked.at.isoformat() if looked.at else None, "error": looked.error}
