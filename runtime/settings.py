"""Limits and compaction settings for a loop: flags first, then the workspace's `chronicle.toml`.

Lives in the runtime (not the CLI) because every way of running turns needs it — `run`,
`chat`, `resume`, the worker, and the loop factory in runtime/assembly.py that a worker calls
once per session, with that session's workspace. A bad file raises SettingsError; the CLI
turns it into a one-line error (exit 2), a worker skips the session and says why.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from .compaction import CompactionSettings, Compactor
from .guards import guard_hooks
from .hooks import Hook

CONFIG_FILE = "chronicle.toml"
DEFAULT_TOOL_TIMEOUT_S = 180.0


class SettingsError(ValueError):
    """chronicle.toml cannot be used; the message names the file and the key."""


@dataclass(frozen=True)
class LimitFlags:
    """The limit flags as given on the command line (None: not given)."""

    budget_usd: float | None = None
    daily_budget_usd: float | None = None
    max_calls_per_hour: int | None = None
    max_tool_calls: int | None = None
    tool_timeout_s: float | None = None


@dataclass(frozen=True)
class Settings:
    """What the loop needs from flags and `chronicle.toml`."""

    budget_usd: float | None = None
    daily_budget_usd: float | None = None
    max_calls_per_hour: int | None = None
    max_tool_calls: int | None = None
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
    compaction: CompactionSettings = CompactionSettings()

    def hooks(self, store: Any, interactive: bool) -> list[Hook]:
        return guard_hooks(
            store, interactive=interactive, budget_usd=self.budget_usd, daily_budget_usd=self.daily_budget_usd,
            max_calls_per_hour=self.max_calls_per_hour, max_tool_calls=self.max_tool_calls,
        )

    def compactor(self) -> Compactor:
        return Compactor(self.compaction)

    def describe(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "compaction"}


def load_config(workspace: Path) -> dict[str, Any]:
    path = workspace / CONFIG_FILE
    if not path.is_file():
        return {}
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path} is not valid TOML: {exc}; fix it or remove it") from None


def _table(config: dict[str, Any], name: str, allowed: set[str], path: Path) -> dict[str, Any]:
    table = config.get(name) or {}
    if not isinstance(table, dict):
        raise SettingsError(f"{path}: [{name}] must be a table")
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise SettingsError(f"{path}: unknown key(s) in [{name}]: {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")
    for key, value in table.items():
        if isinstance(value, bool) and key != "auto" or not isinstance(value, (int, float, bool)) or (value < 0 and key != "auto"):
            raise SettingsError(f"{path}: [{name}] {key} must be a non-negative number (got {value!r})")
    return table


def load_settings(flags: LimitFlags, workspace: Path) -> Settings:
    """Flags first, then `[limits]` and `[compaction]` in the workspace's chronicle.toml."""
    config = load_config(workspace)
    path = workspace / CONFIG_FILE
    names = [f.name for f in fields(LimitFlags)]
    limits = _table(config, "limits", set(names), path)
    compaction = _table(config, "compaction", {f.name for f in fields(CompactionSettings)}, path)
    merged = {name: getattr(flags, name) if getattr(flags, name) is not None else limits.get(name) for name in names}
    if merged["tool_timeout_s"] is None:
        merged["tool_timeout_s"] = DEFAULT_TOOL_TIMEOUT_S
    for key in ("max_calls_per_hour", "max_tool_calls"):
        if merged[key] is not None:
            merged[key] = int(merged[key])
    return Settings(**merged, compaction=replace(CompactionSettings(), **compaction))
