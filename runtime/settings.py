"""Limits and compaction settings for a loop: flags, then what the session recorded, then `chronicle.toml`.

One configuration model, validated once: every value (a flag, a `[limits]` or `[compaction]` key
of the workspace's chronicle.toml) goes through the pydantic models below, and a value that
cannot work is refused with one line naming the setting and the type it needs — `auto = "yes"`,
a threshold outside 0..1, `budget_usd = nan` (which compared false with everything and so
silently disabled the budget) all exit 2 instead of changing behaviour.

Limits are a security boundary: the agent can write chronicle.toml. So the limits a session
started with are recorded on its spec, and when the session is continued (run --session,
resume, a worker) the file may only tighten them; only the operator's flags widen them.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictBool, ValidationError, field_validator

from .compaction import CompactionSettings, Compactor
from .guards import SpendReader, guard_hooks
from .hooks import Hook
from .limit_flags import CONFIG_FILE as CONFIG_FILE  # where the workspace's settings live; importers take it from here
from .limit_flags import DEFAULT_DOOM_LOOP, DEFAULT_TOOL_TIMEOUT_S, LimitFlags
from .validation import explain

FLAG_NAMES = {
    "budget_usd": "--budget-usd", "daily_budget_usd": "--daily-budget-usd", "max_calls_per_hour": "--max-calls-per-hour",
    "max_tool_calls": "--max-tool-calls", "tool_timeout_s": "--tool-timeout", "doom_loop": "--doom-loop",
}


class SettingsError(ValueError):
    """A setting that cannot be used; the message names where it came from and what it must be."""


class LimitValues(BaseModel):
    """`[limits]`, and the limit flags: every number finite, none negative. Strict: `max_tool_calls = "10"` is
    refused (naming the key, the file and the type) rather than quietly read as 10 — a quoted value is a
    mistake more often than a number, and a limit is a security boundary."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)
    budget_usd: float | None = Field(None, ge=0)
    daily_budget_usd: float | None = Field(None, ge=0)
    max_calls_per_hour: int | None = Field(None, ge=1)
    max_tool_calls: int | None = Field(None, ge=1)
    tool_timeout_s: float | None = Field(None, gt=0)
    doom_loop: int | None = Field(None, ge=0)

    @field_validator("max_calls_per_hour", "max_tool_calls", "doom_loop", mode="before")
    @classmethod
    def _whole(cls, value: Any) -> Any:
        if isinstance(value, float) and value.is_integer():
            return int(value)
        return value


class CompactionValues(BaseModel):
    """`[compaction]`: ratios of the context window in 0..1, counts whole, `auto` a boolean; strict, as [limits]."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=True)
    threshold: float = Field(CompactionSettings.threshold, ge=0, le=1)
    critical: float = Field(CompactionSettings.critical, ge=0, le=1)
    keep_recent: int = Field(CompactionSettings.keep_recent, ge=0)
    context_window: int | None = Field(None, ge=1)
    auto: StrictBool = True


@dataclass(frozen=True)
class Settings:
    """What the loop needs from flags, the recorded limits and `chronicle.toml`."""

    budget_usd: float | None = None
    daily_budget_usd: float | None = None
    max_calls_per_hour: int | None = None
    max_tool_calls: int | None = None
    tool_timeout_s: float = DEFAULT_TOOL_TIMEOUT_S
    #: Same tool, same input this many times in a row stops the turn (or asks, in chat); 0: never.
    doom_loop: int = DEFAULT_DOOM_LOOP
    compaction: CompactionSettings = CompactionSettings()
    #: Where each limit came from, as a guard's message names it: "--max-tool-calls", "[limits] max_tool_calls
    #: in /ws/chronicle.toml", "the session's record", "Agent(doom_loop=...)". Unset: the flag's name.
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def source(self, name: str) -> str:
        return self.sources.get(name) or FLAG_NAMES[name]

    def hooks(self, reader: SpendReader | None, interactive: bool) -> list[Hook]:
        return guard_hooks(
            reader, interactive=interactive, budget_usd=self.budget_usd, daily_budget_usd=self.daily_budget_usd,
            max_calls_per_hour=self.max_calls_per_hour, max_tool_calls=self.max_tool_calls,
            doom_loop=self.doom_loop, sources={name: self.source(name) for name in FLAG_NAMES},
        )

    def compactor(self) -> Compactor:
        return Compactor(self.compaction)

    def describe(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("compaction", "sources")}

    def limits(self) -> dict[str, Any]:
        """The limits to record on a new session's spec."""
        return {name: getattr(self, name) for name in FLAG_NAMES}


def load_config(workspace: Path) -> dict[str, Any]:
    path = workspace / CONFIG_FILE
    return read_toml(path) if path.is_file() else {}


def read_toml(path: Path) -> dict[str, Any]:
    """A settings file as a dict; one line naming the file when it cannot be read or parsed."""
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SettingsError(f"{path} is not valid TOML: {exc}; fix it or remove it") from None


def named_tables(workspace: Path, section: str, keys: frozenset[str] | None,
                 error: type[SettingsError]) -> list[tuple[str, Any, str]]:
    """chronicle.toml's `[section.NAME]` tables in declaration order, as (name, table, where-to-say):
    one reading of the shape the guardrail, middleware and routine sections share. With `keys`, each
    entry must be a table holding only those keys; without, the caller checks its entries itself."""
    tables = load_config(workspace).get(section) or {}
    source = str(workspace / CONFIG_FILE)
    if not isinstance(tables, dict):
        raise error(f"{source}: [{section}] must hold [{section}.NAME] tables")
    found = []
    for name, table in tables.items():
        where = f"{source}: {section}.{name}"
        if keys is not None:
            if not isinstance(table, dict):
                raise error(f"{where} must be a table")
            unknown = sorted(set(table) - keys)
            if unknown:
                raise error(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(keys))}")
        found.append((name, table, where))
    return found


def use_tables(workspace: Path, section: str, error: type[SettingsError]) -> list[dict[str, Any]]:
    """`[section.NAME] use = "module:attribute"` tables with an optional `options` table, as the records a
    spec keeps (name, use, options), in declaration order: the shape middleware and hooks share."""
    found = []
    for name, table, where in named_tables(workspace, section, frozenset({"use", "options"}), error):
        if not isinstance(table.get("options", {}), dict):
            raise error(f"{where}: options must be a table")
        found.append({"name": name, "use": table.get("use", ""), "options": table.get("options", {})})
    return found


def config_table(config: dict[str, Any], name: str, model: type[BaseModel], path: Path) -> Any:
    """`[name]` of a settings file checked by its pydantic model; a check that words its own message
    (a value_error) still gets the file's name in front."""
    table = config.get(name) or {}
    if not isinstance(table, dict):
        raise SettingsError(f"{path}: [{name}] must be a table")
    try:
        return model.model_validate(table)
    except ValidationError as exc:
        raise SettingsError(f"{path}: " * (exc.errors()[0]["type"] == "value_error")
                            + explain(exc, f"{path}: [{name}] ", allowed=sorted(model.model_fields))) from None


def _tighter(name: str, recorded: Any, current: Any) -> Any:
    """The stricter of two limits (None: no limit). A doom-loop threshold is stricter the smaller it is,
    but 0 is no guard at all: the loosest."""
    if recorded is None:
        return current
    if current is None:
        return recorded
    if name == "doom_loop" and 0 in (recorded, current):
        return max(recorded, current)
    return min(recorded, current)


def load_settings(flags: LimitFlags, workspace: Path, recorded: dict[str, Any] | None = None,
                  in_code: dict[str, Any] | None = None, compaction: dict[str, Any] | None = None) -> Settings:
    """Flags first; then, for a session that recorded its limits, those limits (the file may only tighten
    them); for a new session (or one recorded before limits were), the limits given in code (`Agent(doom_loop=...)`,
    `in_code`), then `[limits]` of chronicle.toml. `[compaction]` comes from the file, each key of `compaction` (what
    the session's Agent gave in code, as its spec records it) over it. A session recorded before its doom-loop
    threshold was kept the fixed 3 of its day."""
    try:
        given = LimitValues.model_validate({f.name: getattr(flags, f.name) for f in fields(LimitFlags)})
    except ValidationError as exc:
        raise SettingsError(explain(exc, "", FLAG_NAMES)) from None
    config = load_config(workspace)
    path = workspace / CONFIG_FILE
    from .secret_scan import load_privacy

    load_privacy(workspace)  # a bad [privacy] table is refused now, not at the first event
    if isinstance(config.get("limits"), dict) and "max_iterations" in config["limits"]:
        raise SettingsError(f"{path}: [limits] max_iterations: unknown key; model calls per turn are an agent's: "
                            "set max_iterations in [agents.main] (or [agents.NAME]), or pass --max-iterations")
    from_file = config_table(config, "limits", LimitValues, path)
    from_toml = config_table(config, "compaction", CompactionValues, path)
    try:  # the record's keys were checked when the Agent was defined; checked again as one table with the file's
        merged_compaction = CompactionValues.model_validate({**from_toml.model_dump(), **(compaction or {})})
    except ValidationError as exc:
        raise SettingsError(explain(exc, "compaction given in code: ", allowed=sorted(CompactionValues.model_fields))) from None
    if recorded is not None and "doom_loop" not in recorded:
        recorded = {**recorded, "doom_loop": DEFAULT_DOOM_LOOP}
    merged: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for name in FLAG_NAMES:
        flag, file_value = getattr(given, name), getattr(from_file, name)
        in_file = f"[limits] {name} in {path}"
        if flag is not None:
            merged[name], sources[name] = flag, FLAG_NAMES[name]
        elif recorded is not None:
            merged[name] = _tighter(name, recorded.get(name), file_value)
            sources[name] = "the session's record" if merged[name] == recorded.get(name) else in_file
        elif (in_code or {}).get(name) is not None:
            merged[name] = (in_code or {})[name]
            sources[name] = "Agent(doom_loop=...)" if name == "doom_loop" else f"Agent(limits={{'{name}': ...}})"
        else:
            merged[name], sources[name] = file_value, in_file
    if merged["tool_timeout_s"] is None:
        merged["tool_timeout_s"] = DEFAULT_TOOL_TIMEOUT_S
    if merged["doom_loop"] is None:
        merged["doom_loop"], sources["doom_loop"] = DEFAULT_DOOM_LOOP, "the default"
    for value in merged.values():
        assert value is None or math.isfinite(value)
    return Settings(**merged, compaction=CompactionSettings(**merged_compaction.model_dump()), sources=sources)
