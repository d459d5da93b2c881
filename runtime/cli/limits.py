"""Limits shared by every command that runs turns (run, chat, resume, worker).

One decorator adds the flags; one function turns flags plus the workspace's `chronicle.toml`
into the loop's guard hooks, tool timeout and compaction settings. Flags win over the file.

    @limit_options
    def resume(session: str, ..., limits: LimitFlags) -> None:
        settings = resolve_limits(limits, workspace)
        loop = AgentLoop(..., hooks=Hooks(settings.hooks(store, interactive=False)),
                         options=LoopOptions(tool_timeout_s=settings.tool_timeout_s), compactor=settings.compactor())
"""

from __future__ import annotations

import functools
import inspect
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Any, Callable, Optional

import typer

from chronicle.runtime.compaction import CompactionSettings, Compactor
from chronicle.runtime.guards import guard_hooks
from chronicle.runtime.hooks import Hook

from .common import fail

CONFIG_FILE = "chronicle.toml"
DEFAULT_TOOL_TIMEOUT_S = 180.0


@dataclass(frozen=True)
class LimitFlags:
    budget_usd: float | None = None
    daily_budget_usd: float | None = None
    max_calls_per_hour: int | None = None
    max_tool_calls: int | None = None
    tool_timeout_s: float | None = None


_OPTIONS: dict[str, Any] = {
    "budget_usd": Annotated[Optional[float], typer.Option(
        "--budget-usd", min=0, help="Stop the turn (exit 4) once this session has spent this many USD", show_default=False)],
    "daily_budget_usd": Annotated[Optional[float], typer.Option(
        "--daily-budget-usd", min=0, help="Stop (exit 4) once all sessions spent this many USD today (UTC)", show_default=False)],
    "max_calls_per_hour": Annotated[Optional[int], typer.Option(
        "--max-calls-per-hour", min=1, help="Stop (exit 4) before a model call beyond this many in the last hour", show_default=False)],
    "max_tool_calls": Annotated[Optional[int], typer.Option(
        "--max-tool-calls", min=1, help="Stop (exit 4) before a turn's tool call beyond this many", show_default=False)],
    "tool_timeout_s": Annotated[Optional[float], typer.Option(
        "--tool-timeout", min=0.001, help="Seconds before a running tool is stopped [default: 180]", show_default=False)],
}


def limit_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """Add the limit flags to a typer command; the command receives them as ``limits: LimitFlags``."""
    signature = inspect.signature(command, eval_str=True)
    kept = [p for p in signature.parameters.values() if p.name != "limits"]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=hint) for name, hint in _OPTIONS.items()]

    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        flags = LimitFlags(**{name: kwargs.pop(name, None) for name in _OPTIONS})
        return command(*args, limits=flags, **kwargs)

    wrapper.__signature__ = signature.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
    annotations = {k: v for k, v in getattr(command, "__annotations__", {}).items() if k != "limits"}
    wrapper.__annotations__ = {**annotations, **_OPTIONS}
    return wrapper


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
        fail(f"{path} is not valid TOML: {exc}; fix it or remove it", 2)


def _table(config: dict[str, Any], name: str, allowed: set[str], path: Path) -> dict[str, Any]:
    table = config.get(name) or {}
    if not isinstance(table, dict):
        fail(f"{path}: [{name}] must be a table", 2)
    unknown = sorted(set(table) - allowed)
    if unknown:
        fail(f"{path}: unknown key(s) in [{name}]: {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}", 2)
    for key, value in table.items():
        if isinstance(value, bool) and key != "auto" or not isinstance(value, (int, float, bool)) or (value < 0 and key != "auto"):
            fail(f"{path}: [{name}] {key} must be a non-negative number (got {value!r})", 2)
    return table


def resolve_limits(flags: LimitFlags, workspace: Path) -> Settings:
    """Flags first, then `[limits]` and `[compaction]` in the workspace's chronicle.toml."""
    config = load_config(workspace)
    path = workspace / CONFIG_FILE
    limits = _table(config, "limits", {f.name for f in fields(LimitFlags)}, path)
    compaction = _table(config, "compaction", {f.name for f in fields(CompactionSettings)}, path)
    merged = {name: getattr(flags, name) if getattr(flags, name) is not None else limits.get(name) for name in _OPTIONS}
    if merged["tool_timeout_s"] is None:
        merged["tool_timeout_s"] = DEFAULT_TOOL_TIMEOUT_S
    for key in ("max_calls_per_hour", "max_tool_calls"):
        if merged[key] is not None:
            merged[key] = int(merged[key])
    return Settings(**merged, compaction=replace(CompactionSettings(), **compaction))
