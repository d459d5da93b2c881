"""Our retry policy for model calls: exponential backoff with jitter, honouring retry-after."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 8
    base_s: float = 2.0
    cap_s: float = 30.0
    jitter: float = 0.2
    rng: random.Random = field(default_factory=random.Random, compare=False)

    def delay(self, attempt: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait after failed attempt number `attempt` (1-based)."""
        if retry_after_s is not None and retry_after_s >= 0:
            return min(retry_after_s, self.cap_s)
        raw = min(self.base_s * 2 ** (attempt - 1), self.cap_s)
        spread = raw * self.jitter
        return max(0.0, min(self.cap_s, raw + self.rng.uniform(-spread, spread)))
