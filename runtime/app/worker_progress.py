"""How far a worker has looked for work: `GET /healthz`'s `worker` for the server's own.

An operator's question is whether the sessions queued on a server are being picked up: a count of passes that keeps
growing says its worker is alive and looking, `in_hand` how many sessions it was advancing at its last pass (at most
`concurrency`), and `error` why its last look failed (a lost database) while the passes stand still.

Like the outbox's (runtime/server/outbox_progress.py), it also says when something has been looked at: each pass
reads which sessions have work and starts as many of them as it has free slots for before it ends, so once `passes`
has grown by two since a moment, a whole pass began after it. A session not taken by then was not taken for want of
a slot (a test of `--concurrency` waits on this rather than sleeping "long enough").
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..clock import SYSTEM_CLOCK
from ..redaction import redact_secrets


@dataclass(frozen=True)
class Passes:
    #: Looks for work completed since the worker started.
    passes: int = 0
    #: Sessions being advanced when the last pass ended.
    in_hand: int = 0
    at: datetime | None = None
    #: Why the last look failed, one line; None once a pass completes again.
    error: str | None = None


class WorkerProgress:
    """Written by the worker's thread after each look for work, read by /healthz on a request's."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._passes = Passes()

    def completed(self, in_hand: int) -> None:
        with self._lock:
            self._passes = Passes(self._passes.passes + 1, in_hand, SYSTEM_CLOCK.now(), None)

    def failed(self, exc: BaseException) -> None:
        said = redact_secrets((str(exc).strip().splitlines() or [""])[0])  # the store's words: no secret
        with self._lock:
            self._passes = Passes(self._passes.passes, self._passes.in_hand, self._passes.at,
                                  f"{type(exc).__name__}: {said}" if said else type(exc).__name__)

    @property
    def passes(self) -> Passes:
        with self._lock:
            return self._passes

    def row(self, running: bool, concurrency: int | None) -> dict[str, Any]:
        """`running`: whether the worker runs and is not draining; `concurrency`: its slots (None with no worker)."""
        passes = self.passes
        return {"running": running, "concurrency": concurrency, "in_hand": passes.in_hand, "passes": passes.passes,
                "last_pass_at": passes.at.isoformat() if passes.at else None, "error": passes.error}
