"""The limit flags as a command line gives them, apart from the settings machinery that reads them.

Every command that runs turns declares these flags (runtime/cli/limits.py), so its `--help` needs
them; runtime/settings.py, which turns them into Settings, imports pydantic, the guards and the
compactor. Kept here, `chronicle run --help` shows its flags without importing any of that.
"""

from __future__ import annotations

from dataclasses import dataclass

CONFIG_FILE = "chronicle.toml"
DEFAULT_TOOL_TIMEOUT_S = 180.0
#: The same tool with the same input this many times in a row is a doom loop (seed 002); 0 turns the guard off.
DEFAULT_DOOM_LOOP = 3


@dataclass(frozen=True)
class LimitFlags:
    """The limit flags as given on the command line (None: not given)."""

    budget_usd: float | None = None
    daily_budget_usd: float | None = None
    max_calls_per_hour: int | None = None
    max_tool_calls: int | None = None
    tool_timeout_s: float | None = None
    doom_loop: int | None = None
