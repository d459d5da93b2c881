"""The Anthropic provider's environment settings, each checked once at startup.

A bad value is one line naming the setting, what it holds and what is expected, raised as a
ValueError (ProviderConfigError subclasses it) before anything is recorded. Without this,
`ANTHROPIC_BASE_URL=notaurl` was retried as a connection error eight times, and
`CHRONICLE_HTTP_TIMEOUT_S=abc` or an out-of-range `CHRONICLE_THINKING_TOKENS` failed deep inside
a turn. Each check is a small function of one raw value so a settings model can call them too.
"""

from __future__ import annotations

import math
import os
from typing import Mapping
from urllib.parse import urlsplit

#: The API's floor for an extended-thinking budget.
MIN_THINKING_TOKENS = 1024
DEFAULT_HTTP_TIMEOUT_S = 600.0


class SettingError(ValueError):
    """One environment setting cannot be used; the message names it."""


def _shown(raw: str) -> str:
    return repr(raw if len(raw) <= 60 else raw[:57] + "...")


def thinking_budget(raw: str | None, max_tokens: int) -> int | None:
    """`CHRONICLE_THINKING_TOKENS`: unset or empty is off; else a budget `in_thinking_range`."""
    if raw is None or not raw.strip():
        return None
    try:
        value: int | None = int(raw.strip())
    except ValueError:
        value = None
    return in_thinking_range(value, max_tokens, f"CHRONICLE_THINKING_TOKENS={_shown(raw)}", "or unset for no thinking")


def in_thinking_range(value: object, max_tokens: int, setting: str, off: str) -> int:
    """The one check of an extended-thinking budget, wherever it comes from (the environment, `chronicle model
    --thinking`, chat's /model, the API): a whole number ≥ 1024 and < max_tokens (the API's rules: the budget is
    part of max_tokens, so it must leave room for the answer). `setting` says where the value came from and
    `off` how to turn thinking off there, so the one line names both."""
    if isinstance(value, bool) or not isinstance(value, int) or not MIN_THINKING_TOKENS <= value < max_tokens:
        raise SettingError(
            f"{setting}: expected a whole number of tokens from {MIN_THINKING_TOKENS} "
            f"to {max_tokens - 1} (at least {MIN_THINKING_TOKENS} and below max_tokens {max_tokens}), {off}"
        )
    return value


def http_timeout_s(raw: str | None) -> float:
    """`CHRONICLE_HTTP_TIMEOUT_S`: seconds, a finite number above 0 (default 600)."""
    if raw is None or not raw.strip():
        return DEFAULT_HTTP_TIMEOUT_S
    try:
        value = float(raw.strip())
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise SettingError(f"CHRONICLE_HTTP_TIMEOUT_S={_shown(raw)}: expected a number of seconds above 0, like 600")
    return value


def base_url(raw: str | None) -> str | None:
    """`ANTHROPIC_BASE_URL`: an http(s) URL with a host, or unset for the SDK's default."""
    if raw is None or not raw.strip():
        return None
    try:
        parts = urlsplit(raw.strip())
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        parts = None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
        raise SettingError(f"ANTHROPIC_BASE_URL={_shown(raw)}: expected an http:// or https:// URL with a host, like https://api.anthropic.com")
    return raw.strip()


def check_anthropic_env(max_tokens: int, environ: Mapping[str, str] | None = None) -> dict[str, object]:
    """All three checked at once; the validated values by setting name."""
    env = os.environ if environ is None else environ
    return {
        "ANTHROPIC_BASE_URL": base_url(env.get("ANTHROPIC_BASE_URL")),
        "CHRONICLE_HTTP_TIMEOUT_S": http_timeout_s(env.get("CHRONICLE_HTTP_TIMEOUT_S")),
        "CHRONICLE_THINKING_TOKENS": thinking_budget(env.get("CHRONICLE_THINKING_TOKENS"), max_tokens),
    }
