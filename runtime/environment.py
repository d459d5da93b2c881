"""The process environment as one validated model (pydantic-settings): CHRONICLE_* variables.

Read once per process and checked whole, so `CHRONICLE_HTTP_TIMEOUT_S=abc` is one clear line
naming the variable and the type it needs (exit 2) before anything runs, rather than a
traceback deep in a provider or a value silently ignored. Precedence is the usual one: a
command-line flag wins over the environment, which wins over chronicle.toml (runtime/settings.py)
and the defaults.
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from .config import DEFAULT_DURABILITY, PG_CONNECT_TIMEOUT_S, SQLITE_BUSY_TIMEOUT_S
from .providers.env_settings import DEFAULT_HTTP_TIMEOUT_S, SettingError, base_url, http_timeout_s, thinking_budget
from .validation import explain

#: 2 MiB: a prompt with a whole model context of pasted text (≈ 200k tokens, under 1 MB of English,
#: more as JSON's \u escapes of other scripts) fits; what cannot fit a context is refused before it is read.
DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024
#: Seconds `serve`'s outbox waits before a reply's second attempt, and before each later one (runtime/server/outbox.py).
DEFAULT_REPLY_BACKOFF_S = (0.5, 2.0)


class EnvironmentSettingError(ValueError):
    """An environment variable that cannot work; the message names it and the type it needs."""


class Environment(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="CHRONICLE_", extra="ignore", allow_inf_nan=False, case_sensitive=False)

    #: Seconds one HTTP request to the model provider may take (checked as the provider checks it).
    http_timeout_s: float = DEFAULT_HTTP_TIMEOUT_S
    #: Extended thinking budget, as written; checked against max_tokens below.
    thinking_tokens: str | None = None
    #: Output tokens one model call may produce.
    max_tokens: int = Field(8192, ge=1)
    max_attempts: int | None = Field(None, ge=1)
    retry_base_s: float = Field(2.0, ge=0)
    retry_cap_s: float = Field(30.0, ge=0)
    pg_connect_timeout: float = Field(PG_CONNECT_TIMEOUT_S, gt=0)
    #: Whole seconds a SQLite write waits for another process's lock (runtime/config.py, `sqlite_busy_timeout`).
    sqlite_busy_timeout: int = Field(SQLITE_BUSY_TIMEOUT_S, ge=1)
    #: Which commits wait for the disk (runtime/config.py, `relaxed_commits`).
    durability: Literal["effects", "every-commit"] = DEFAULT_DURABILITY
    #: Sub-agents running at once in one process, across the whole tree (CHRONICLE_MAX_CONCURRENT_SUBAGENTS).
    max_concurrent_subagents: int = Field(8, ge=1)
    #: The largest request body `chronicle serve` reads (runtime/server/body_limit.py); above it, 413.
    server_max_body_bytes: int = Field(DEFAULT_MAX_BODY_BYTES, ge=1024)
    #: Live event streams `chronicle serve` holds open at once (runtime/server/event_stream.py); one more is 503. None:
    #: half the process's file descriptor limit, so that /healthz and the API can still be reached.
    server_max_streams: int | None = Field(None, ge=1)
    #: The waits between `serve`'s attempts at one reply, comma-separated seconds ("0.5,2.0"): the last repeats.
    server_reply_backoff_s: Annotated[tuple[float, ...], NoDecode] = DEFAULT_REPLY_BACKOFF_S
    #: Host names besides loopback ones a server reached on loopback answers to, and whose pages may make changes
    #: (runtime/server/cross_site.py), comma-separated: a reverse proxy's public name.
    server_allowed_hosts: Annotated[tuple[str, ...], NoDecode] = ()
    #: A JSON price table that overrides and extends the bundled prices.
    prices: Path | None = None
    #: The auxiliary model a new session records (runtime/spec_options.py); wins over [models] auxiliary.
    aux_model: str | None = None

    @field_validator("thinking_tokens", "max_attempts", "prices", "aux_model", "server_max_streams", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value

    @field_validator("server_reply_backoff_s", mode="before")
    @classmethod
    def _backoff(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        if not value.strip():
            return DEFAULT_REPLY_BACKOFF_S
        try:
            waits = tuple(float(part) for part in value.split(","))
        except ValueError:
            waits = ()
        if not waits or not all(math.isfinite(w) and 0 <= w <= 600 for w in waits):
            raise EnvironmentSettingError(
                f"CHRONICLE_SERVER_REPLY_BACKOFF_S={value!r}: takes seconds from 0 to 600, comma-separated "
                "(the waits between a reply's attempts, e.g. 0.5,2.0); fix it or unset it")
        return waits

    @field_validator("server_allowed_hosts", mode="before")
    @classmethod
    def _hosts(cls, value: object) -> object:
        if not isinstance(value, str):
            return value
        names = tuple(part.strip().lower().rstrip(".") for part in value.split(",") if part.strip())
        bad = [name for name in names if not name or any(c in name for c in "/:@[] ") or not name.isprintable()]
        if bad:
            raise EnvironmentSettingError(
                f"CHRONICLE_SERVER_ALLOWED_HOSTS={value!r}: takes host names without scheme or port, comma-separated "
                f"(e.g. chronicle.example.com), not {bad[0]!r}; fix it or unset it")
        return names

    @field_validator("http_timeout_s", mode="before")
    @classmethod
    def _timeout(cls, value: object) -> float:
        try:
            return http_timeout_s(None if value is None else str(value))
        except SettingError as exc:
            raise EnvironmentSettingError(str(exc)) from None


NAMES = {name: f"CHRONICLE_{name.upper()}" for name in Environment.model_fields}


#: Validated environments by the variables they were read from (see `environment`).
_READ: dict[tuple[tuple[str, str], ...], Environment] = {}


def _variables() -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k.upper(), v) for k, v in os.environ.items() if k.upper().startswith("CHRONICLE_") or k == "ANTHROPIC_BASE_URL"))


def environment() -> Environment:
    """The validated environment, read as it is now (tests and embedding programs change it). Raises EnvironmentSettingError.

    Validating it costs ≈ 1 ms (pydantic-settings), and every loop built (one per turn in a
    program that runs many) asks for its retry policy, so a result is kept for the variables it
    was read from and handed out as a copy: a changed variable is a new key, read afresh. A price
    table file is read again every time (its content may change under the same name)."""
    key = _variables()
    kept = _READ.get(key)
    if kept is not None:
        return kept.model_copy()
    env = _read()
    if env.prices is None:
        _READ.clear()  # one environment at a time is what a process has
        _READ[key] = env.model_copy()
    return env


def _read() -> Environment:
    try:
        env = Environment()
    except EnvironmentSettingError:
        raise
    except ValidationError as exc:
        raise EnvironmentSettingError(explain(exc, "CHRONICLE_", NAMES)) from None
    try:  # the provider's own checks, so a value is refused here in the same words as there
        thinking_budget(env.thinking_tokens, env.max_tokens)
        base_url(os.environ.get("ANTHROPIC_BASE_URL"))
    except SettingError as exc:
        raise EnvironmentSettingError(str(exc)) from None
    if env.prices is not None:
        from .pricing import PriceTableError, load_override

        try:
            load_override(str(env.prices))
        except PriceTableError as exc:
            raise EnvironmentSettingError(str(exc)) from None
    return env

