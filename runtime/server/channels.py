"""Input channels (seed 000): webhooks that feed a session, bursts coalesced, answers sent back.

`[channels.NAME]` in chronicle.toml says where a channel's messages go, a coalescing window, and
where the answers go:

    [channels.alerts]
    session = "3f2a9c1e-…"      # the session (or a unique prefix) the channel's messages go to
    coalesce_s = 2              # messages from one sender within this window become one input
    reply_url = "http://…"      # the answer of each turn a message started is POSTed here (outbox.py)

    [channels.signal]
    route = "per_sender"        # each sender a session of its own (routing.py), started as
    agent = "helper"            # this agent of the registry (default: main), with
    provider = "scripted:…"     # this provider and model (default: as `run` picks them)

    [channels.ops]
    reply_url = "https://…"     # only this: the channel takes no input, it only sends the findings
                                # of routines that name it in `notify` (notify.py)

Each input records its channel and sender (Session.InputQueued's `origin`), so `log`, `history`
and `audit` say who asked.

As the seed describes, messages from the same sender within the window are concatenated before
they are queued (FIFO behind the running turn), so a burst becomes one turn instead of several.
The burst is held in memory for at most `coalesce_s`: acknowledged as accepted (202) at once and
recorded when the window closes; with `coalesce_s = 0` each message is recorded before the answer.
"""

from __future__ import annotations

import asyncio
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

#: The settings that say a channel takes input; a channel with a reply_url and none of them only sends.
INPUT_SETTINGS = frozenset({"session", "route", "agent", "provider", "model", "coalesce_s"})


class ChannelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session: str | None = Field(default=None, min_length=1)
    route: Literal["session", "per_sender"] = "session"
    agent: str | None = Field(default=None, min_length=1)
    provider: str | None = Field(default=None, min_length=1)
    model: str | None = Field(default=None, min_length=1)
    coalesce_s: float = Field(default=2.0, ge=0, le=300, allow_inf_nan=False)
    reply_url: str | None = None

    @field_validator("reply_url")
    @classmethod
    def _http_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("an http:// or https:// URL with a host")
        return value

    @property
    def takes_input(self) -> bool:
        """False for an outbound-only channel: `POST /hooks/NAME` is refused, nothing recorded."""
        return self.route == "per_sender" or self.session is not None

    @model_validator(mode="after")
    def _route_settings(self) -> "ChannelConfig":
        if self.reply_url is not None and not (self.model_fields_set & INPUT_SETTINGS):
            return self  # outbound only: no input setting was given, so no route is missing
        if self.route == "session" and self.session is None:
            raise ValueError('route = "session" (the default) needs session = "ID or prefix"; or route = "per_sender"')
        if self.route == "per_sender" and self.session is not None:
            raise ValueError('route = "per_sender" starts a session per sender: drop session, or route = "session"')
        if self.route == "session" and (self.agent or self.provider or self.model):
            raise ValueError('agent, provider and model apply to route = "per_sender" (new sessions); '
                             "the configured session keeps its own")
        return self


class ChannelError(ValueError):
    """chronicle.toml's [channels] cannot be used; the message names the channel and the setting."""


def load_channels(path: Path | None) -> dict[str, ChannelConfig]:
    if path is None or not path.is_file():
        return {}
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8")).get("channels", {})
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ChannelError(f"{path}: {exc}") from None
    channels = {}
    for name, table in raw.items():
        try:
            channels[name] = ChannelConfig.model_validate(table)
        except ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(str(p) for p in first["loc"])
            said = first["msg"].removeprefix("Value error, ")
            raise ChannelError(f"{path}: [channels.{name}] {where + ': ' if where else ''}{said}") from None
    return channels


@dataclass
class _Burst:
    texts: list[str] = field(default_factory=list)
    flush: asyncio.TimerHandle | None = None


class Coalescer:
    """Holds each sender's burst for the channel's window, then records it as one input."""

    def __init__(self, record: Callable[[str, ChannelConfig, list[str], str], Any]) -> None:
        self.record = record  # (channel, its config, senders, text) -> whatever recording returns
        self.bursts: dict[tuple[str, str], _Burst] = {}

    def add(self, channel: str, config: ChannelConfig, sender: str, text: str) -> int:
        """Queue `text`; returns how many messages the sender's open burst now holds (0: recorded now)."""
        if config.coalesce_s == 0:
            self.record(channel, config, [sender], text)
            return 0
        key = (channel, sender)
        burst = self.bursts.setdefault(key, _Burst())
        burst.texts.append(text)
        if burst.flush is None:
            loop = asyncio.get_running_loop()
            burst.flush = loop.call_later(config.coalesce_s, self._flush, key, config)
        return len(burst.texts)

    def _flush(self, key: tuple[str, str], config: ChannelConfig) -> None:
        burst = self.bursts.pop(key, None)
        if burst and burst.texts:
            self.record(key[0], config, [key[1]], "\n".join(burst.texts))

    def flush_all(self, channels: dict[str, ChannelConfig]) -> None:
        """On shutdown: record every open burst now rather than lose it."""
        for key in list(self.bursts):
            burst = self.bursts[key]
            if burst.flush is not None:
                burst.flush.cancel()
            self._flush(key, channels[key[0]])
