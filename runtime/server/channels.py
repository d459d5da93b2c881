"""Input channels (seed 000): webhooks that feed a configured session, bursts coalesced.

`[channels.NAME]` in chronicle.toml names the session a channel feeds and a coalescing window:

    [channels.alerts]
    session = "3f2a9c1e-…"      # the session (or a unique prefix) the channel's messages go to
    coalesce_s = 2              # messages from one sender within this window become one input

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
from typing import Any, Callable

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class ChannelConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    session: str = Field(min_length=1)
    coalesce_s: float = Field(default=2.0, ge=0, le=300, allow_inf_nan=False)


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
            raise ChannelError(f"{path}: [channels.{name}] {where}: {first['msg']}") from None
    return channels


@dataclass
class _Burst:
    texts: list[str] = field(default_factory=list)
    flush: asyncio.TimerHandle | None = None


class Coalescer:
    """Holds each sender's burst for the channel's window, then records it as one input."""

    def __init__(self, record: Callable[[str, str], Any]) -> None:
        self.record = record  # (session ref, text) -> whatever submit returns
        self.bursts: dict[tuple[str, str], _Burst] = {}

    def add(self, channel: str, config: ChannelConfig, sender: str, text: str) -> int:
        """Queue `text`; returns how many messages the sender's open burst now holds (0: recorded now)."""
        if config.coalesce_s == 0:
            self.record(config.session, text)
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
            self.record(config.session, "\n".join(burst.texts))

    def flush_all(self, channels: dict[str, ChannelConfig]) -> None:
        """On shutdown: record every open burst now rather than lose it."""
        for key in list(self.bursts):
            burst = self.bursts[key]
            if burst.flush is not None:
                burst.flush.cancel()
            self._flush(key, channels[key[0]])
