"""Middleware: user-supplied wrappers around a whole run of a turn (the seed's Timeout, Recovery, Logger).

A middleware is an async callable `around(run, call_next)`: it may act before the run, await
`call_next()` (the next middleware, and last the loop driving the turn to its end, which returns
the TurnOutcome), and act after it. The first one listed is the outermost. Declared in
chronicle.toml, or on an `Agent(middleware=[...])` in Python (recorded on the session's spec by
import path, so a worker or `resume` in another process wraps its runs the same way):

    [middleware.deadline]
    use = "chronicle.runtime.middleware:Timeout"   # module:attribute, the workspace importable
    options = { seconds = 300 }                     # optional: use(**options) makes the middleware

What a middleware decides that matters is an event, never a silent gap: `run.record(action, ...)`
records a `Turn.MiddlewareApplied` event (an audit row of kind `middleware`); `run.interrupt(reason)`
stops the run at once and `raise RunFailed(reason)` refuses or ends it, both failing the turn with
`error: {"middleware": NAME, "kind": ...}`; a middleware that raises anything else fails the turn
the same way, naming the exception. An error inside the run never reaches a middleware as an
exception: the loop records it as the turn's failure first (the seed's Recovery is built in), and
`call_next()` returns that outcome.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from uuid import UUID

from .app.errors import DefinitionError
from .import_paths import Ambiguous, Defined, NotLoadable, is_well_formed, remembered
from .import_paths import load as load_path
from .settings import CONFIG_FILE, SettingsError, use_tables

CallNext = Callable[[], Awaitable[Any]]
Around = Callable[["Run", CallNext], Awaitable[Any]]


class RunFailed(Exception):
    """Raised by a middleware to fail the turn with this message; `kind` says what decided it."""

    def __init__(self, message: str, kind: str = "rejected") -> None:
        super().__init__(message)
        self.kind = kind


class MiddlewareFailure(Exception):
    """A middleware failed the run (RunFailed, interrupt, or a bug in it): the loop fails the turn with it."""

    def __init__(self, name: str, message: str, kind: str) -> None:
        super().__init__(f"middleware {name}: {message}")
        self.name, self.message, self.kind = name, message, kind


class MiddlewareError(SettingsError):
    """A middleware entry cannot be used (bad table, path that does not load); the message names it."""


@dataclass
class Run:
    """What a middleware sees of the run it wraps, and its two ways to act on the record."""

    name: str
    session_id: UUID
    turn_id: UUID
    number: int
    agent: str
    input: str
    _record: Callable[[dict[str, Any]], None] = field(repr=False)
    _interrupt: Callable[[str, str, str], bool] = field(repr=False)

    def record(self, action: str, **detail: Any) -> None:
        """Record a decision as a Turn.MiddlewareApplied event: `{"middleware": name, "action": action, **detail}`
        (JSON values; never put secrets in it — it is stored)."""
        self._record({"middleware": self.name, "action": action, **detail})

    def interrupt(self, reason: str, kind: str = "interrupted") -> bool:
        """Stop the run now (a model call or tool in progress is cancelled, recorded so); the turn fails with
        `reason`. False when nothing is running any more."""
        return self._interrupt(self.name, reason, kind)


@dataclass(frozen=True)
class Middleware:
    """A named middleware: `use` is the callable, a class or factory called with `options`, or an import path."""

    name: str
    use: Any
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """A DefinitionError (ChronicleError code 2) naming the field: a name that is not text started a session whose
        turns then failed, one after another, on the record it made."""
        if not isinstance(self.name, str) or not self.name.strip():
            raise DefinitionError(f"Middleware {self.name!r}: name takes text, like Middleware(\"audit\", around)")
        if not (callable(self.use) or isinstance(self.use, str)):
            raise DefinitionError(f"middleware {self.name}: use takes a function, a class or an import path, "
                                  f"not {type(self.use).__name__}")
        if not isinstance(self.options, dict):
            raise DefinitionError(f"middleware {self.name}: options takes a dict, not {type(self.options).__name__}")

    def record(self) -> dict[str, Any]:
        return {"name": self.name, "use": use_path(self.use), "options": dict(self.options)}


def middleware_record(item: Any, agent: str = "") -> dict[str, Any]:
    """A middleware= item as a spec records it: name, import path, options. A dataclass instance (such as
    Timeout(seconds=30)) is recorded as its class and fields; a function by its path and name."""
    where = f"agent {agent}: " if agent else ""
    if isinstance(item, Middleware):
        return item.record()
    if dataclasses.is_dataclass(item) and not isinstance(item, type) and callable(item):
        options = {f.name: getattr(item, f.name) for f in dataclasses.fields(item)}
        return {"name": type(item).__name__.lower(), "use": use_path(type(item)), "options": options}
    if inspect.isfunction(item) or inspect.ismethod(item):
        return {"name": item.__name__, "use": use_path(item), "options": {}}
    raise TypeError(f"{where}middleware= takes Middleware objects, async functions (run, call_next), or dataclass "
                    f"instances with such a __call__, not {type(item).__name__}")


#: Middleware defined in this process, by the import path a spec records for them.
_DEFINED = Defined("middleware", "middleware")


def use_path(target: Any) -> str:
    return remembered(_DEFINED, target)


def load(record: dict[str, Any], where: str, workspace: Path | None) -> tuple[str, Around]:
    """(name, the callable) of a recorded or configured middleware; a MiddlewareError names what is wrong."""
    path, options = str(record.get("use") or ""), dict(record.get("options") or {})
    if path not in _DEFINED and not is_well_formed(path):
        raise MiddlewareError(f"{where}: use must be an import path, package.module:attribute (got {path!r})")
    try:
        target = load_path(path, workspace, _DEFINED)
    except NotLoadable as failed:
        raise MiddlewareError(f"{where}: cannot load middleware {path!r}: {failed.first_line}{failed.hint}") from None
    except Ambiguous as exc:
        raise MiddlewareError(f"{where}: middleware {exc}") from None
    if inspect.isclass(target) or options:
        try:
            target = target(**options)
        except Exception as exc:  # noqa: BLE001 - bad options are the user's to fix
            raise MiddlewareError(f"{where}: {path}(**{options!r}) failed: {type(exc).__name__}: {exc}") from None
    if not callable(target):
        raise MiddlewareError(f"{where}: {path!r} is not callable as around(run, call_next)")
    return str(record["name"]), target


def configured(workspace: Path) -> list[dict[str, Any]]:
    """chronicle.toml's [middleware.NAME] tables as records, in declaration order."""
    return use_tables(workspace, "middleware", MiddlewareError)


def recorded_middleware(records: Any, workspace: Path) -> list[tuple[str, Around]]:
    """The middleware a session's spec recorded (from `Agent(middleware=...)`), each loaded. A sub-agent's
    runs are wrapped in these alone: they run inside its parent's run, which chronicle.toml's already wrap."""
    return [load(dict(r), f"middleware {r['name']} recorded on the session", workspace) for r in records or ()]


def middleware_for(records: Any, workspace: Path) -> list[tuple[str, Around]]:
    """The session's recorded middleware, then chronicle.toml's not named the same, each loaded."""
    loaded = recorded_middleware(records, workspace)
    names = {name for name, _ in loaded}
    for record in configured(workspace):
        if record["name"] not in names:
            loaded.append(load(record, f"{workspace / CONFIG_FILE}: middleware.{record['name']}", workspace))
    return loaded


Fail = Callable[[MiddlewareFailure], Awaitable[Any]]


def chain(middleware: list[tuple[str, Around]], make_run: Callable[[str], Run], innermost: CallNext, fail: Fail) -> CallNext:
    """The run wrapped in each middleware, the first outermost. A middleware that fails (RunFailed, any other
    exception, or returning without running the turn) is handed to `fail`, which records it and returns
    the turn's outcome: the middleware around it get that outcome, as they would any other."""
    call = innermost
    for name, around in reversed(middleware):
        call = _layer(name, around, make_run(name), call, fail)
    return call


def _layer(name: str, around: Around, run: Run, call_next: CallNext, fail: Fail) -> CallNext:
    async def layer() -> Any:
        outcome: list[Any] = []

        async def next_() -> Any:
            if not outcome:
                outcome.append(await call_next())
            return outcome[0]  # a second call does not run the turn again: a finished turn stays finished

        try:
            await around(run, next_)
        except asyncio.CancelledError:
            raise
        except MiddlewareFailure as failure:
            return await fail(failure)
        except RunFailed as exc:
            return await fail(MiddlewareFailure(name, str(exc) or "failed the run", exc.kind))
        except Exception as exc:  # noqa: BLE001 - a broken middleware fails the turn, it does not crash the process
            return await fail(MiddlewareFailure(name, f"raised {type(exc).__name__}: {exc}", "error"))
        if not outcome:
            return await fail(MiddlewareFailure(name, "returned without running the turn; await call_next(), or raise RunFailed", "error"))
        return outcome[0]

    return layer


# -- built-ins -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timeout:
    """Interrupt a run that takes longer than `seconds` (each time a process runs the turn: a resume after
    an approval starts a new deadline); the turn fails with `error: {"middleware": NAME, "kind": "timeout"}`."""

    seconds: float

    def __post_init__(self) -> None:
        seconds = self.seconds
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds <= 0:
            raise DefinitionError(f"Timeout: seconds must be a positive number (got {seconds!r})")

    async def __call__(self, run: Run, call_next: CallNext) -> Any:
        handle = asyncio.get_running_loop().call_later(
            self.seconds, run.interrupt, f"the run took longer than {self.seconds:g} s", "timeout")
        try:
            return await call_next()
        finally:
            handle.cancel()


@dataclass(frozen=True)
class Logger:
    """Log each run's start, end, status and duration to the Python logger `logger` (nothing is recorded:
    the log already holds all of it)."""

    logger: str = "chronicle.run"

    async def __call__(self, run: Run, call_next: CallNext) -> Any:
        log = logging.getLogger(self.logger)
        log.info("run start session=%s turn=%d agent=%s", run.session_id, run.number, run.agent)
        started = time.monotonic()
        outcome = await call_next()
        log.info("run end session=%s turn=%d status=%s duration_s=%.3f", run.session_id, run.number,
                 getattr(outcome, "status", "?"), time.monotonic() - started)
        return outcome
