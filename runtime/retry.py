"""Our retry policy for model calls: exponential backoff with jitter, honouring retry-after.

2 s · 2^(n-1) with ±20 % jitter, capped at 30 s, 8 attempts in all by default; a server's retry-after
is waited out as asked, up to five minutes. The environment
can change it for a whole process (CHRONICLE_MAX_ATTEMPTS, CHRONICLE_RETRY_BASE_S,
CHRONICLE_RETRY_CAP_S): operators tune it without code, and tests run it with a tiny base.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

#: The longest server-asked wait honoured: beyond it, the call is tried again after this long.
RETRY_AFTER_CEILING_S = 300.0


class RetrySettingError(ValueError):
    """A retry setting that cannot work; the message names it and what it accepts."""


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
            # The server knows when it will take the call again: sooner only wastes an attempt (the
            # cap is for guessing, as the seeds' retry policy says); a day-long header is not waited out.
            return min(retry_after_s, max(self.cap_s, RETRY_AFTER_CEILING_S))
        raw = min(self.base_s * 2 ** (attempt - 1), self.cap_s)
        spread = raw * self.jitter
        return max(0.0, min(self.cap_s, raw + self.rng.uniform(-spread, spread)))

    @classmethod
    def from_env(cls, max_attempts: int | None = None) -> "RetryPolicy":
        """The default policy, adjusted by the environment; an explicit max_attempts wins."""
        from .environment import EnvironmentSettingError, environment

        try:
            env = environment()
        except EnvironmentSettingError as exc:
            raise RetrySettingError(str(exc)) from None
        attempts = max_attempts if max_attempts is not None else (env.max_attempts or cls.max_attempts)
        if attempts < 1:
            raise RetrySettingError(f"max attempts must be at least 1 (got {attempts}); 1 means no retries")
        return cls(max_attempts=attempts, base_s=env.retry_base_s, cap_s=env.retry_cap_s)
