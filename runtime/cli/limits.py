"""Limits shared by every command that runs turns (run, chat, resume, worker).

One decorator adds the flags; the application layer (runtime/app/running.py, runtime/app/loops.py)
turns them, the limits a session recorded and the workspace's `chronicle.toml` into Settings
(runtime/settings.py), exiting 2 on a bad value. The loop factory turns Settings into guard
hooks, tool timeout and compactor.

    @limit_options
    def resume(session: str, ..., limits: LimitFlags) -> None:
        loop = build_loop(store, session, limits=limits, ...)
"""

from __future__ import annotations

import functools
import inspect
from typing import Annotated, Any, Callable, Optional

import typer

from chronicle.runtime.limit_flags import LimitFlags

__all__ = ["LimitFlags", "limit_options"]


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
        "--tool-timeout", min=0.001, help="Seconds before a running tool is stopped (default: 180)", show_default=False)],
    "doom_loop": Annotated[Optional[int], typer.Option(
        "--doom-loop", min=0, help="Same tool, same input this many times in a row is a doom loop (default: 3; 0: off)",
        show_default=False)],
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
