"""The public API's arguments, checked as the command line checks its flags.

Why: a program reaches the use cases without typer in front, so `history(sid, at=0)` or
`run_sync(agent, None)` went straight in — an AttributeError from deep inside, or worse, a
session recorded from nonsense (`max_iterations=-1` recorded a failed turn). Every public method
is wrapped with pydantic's `validate_call`, its bounds the CLI's (`--at` from 1, `--keep` from 0,
…), and a bad argument is a `ChronicleError` with code 2, the exit code the CLI gives a bad flag.

Strict, not coerced: a program's `approve(sid, always="yes")` became a standing always-allow, and
`undo(sid, turns="2")` or `history(sid, at=True)` a number, where the CLI's parser and the HTTP
server's bodies (runtime/server/bodies.py) take no such thing. A bool must be a bool and an int an
int (not a bool); an int is still taken for a float (`cancel(sid, wait_s=5)`).
"""

from __future__ import annotations

import asyncio
import functools
import inspect
from typing import Annotated, Any, Callable, Coroutine, TypeVar
from uuid import UUID

from pydantic import AfterValidator, ConfigDict, Field, ValidationError, validate_call
from pydantic_core import ErrorDetails

from chronicle.runtime.bounds import LARGEST, MAX_IDLE_EXIT_S, MAX_LEASE_S, MAX_POLL_S

from .errors import ChronicleError

#: A session: its id (a UUID, or its text), or an unambiguous prefix of it, as `RunResult.session_id` holds it. A UUID
#: is handed on as its text, so that one naming no session is the usage error (code 2) an unknown id is everywhere,
#: not a "no session with id" NotFound (code 1) from deeper in, where the use cases take a UUID as already resolved.
SessionRef = Annotated[str | UUID, AfterValidator(str)]
#: A turn or event number, counted from 1 as `--at` and `--version` count.
FromOne = Annotated[int, Field(ge=1, le=LARGEST)]
#: A count that may be zero (`--keep`, `--step`).
FromZero = Annotated[int, Field(ge=0, le=LARGEST)]
#: How many rows to keep (`audit`'s `limit` and `last`): one beyond any row count means all of them, so a huge one
#: is taken as the largest the stores hold (runtime/bounds.py), as `--limit` takes it.
RowCount = Annotated[int, Field(ge=1), AfterValidator(lambda n: min(n, LARGEST))]
#: A model name: not empty (the use case checks its spelling and the provider's naming).
ModelName = Annotated[str, Field(min_length=1)]
#: Seconds to wait: finite and not negative (`--wait`).
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]

#: Seconds between a worker's looks for new work: `worker --poll`'s bound (at least 0.05, at most a day).
PollSeconds = Annotated[float, Field(ge=0.05, le=MAX_POLL_S, allow_inf_nan=False)]
#: Seconds a worker's claim on a session lasts without renewal: `worker --lease-s`'s bound (at least 0.5, at most a
#: day: far beyond it the claim's expiry overflowed a datetime at the first claim).
LeaseSeconds = Annotated[float, Field(ge=0.5, le=MAX_LEASE_S, allow_inf_nan=False)]
#: Seconds idle before a worker exits: `worker --idle-exit`'s bound (not negative, at most a week).
IdleSeconds = Annotated[float, Field(ge=0, le=MAX_IDLE_EXIT_S, allow_inf_nan=False)]

_CONFIG = ConfigDict(arbitrary_types_allowed=True, strict=True)

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T")


def checked(func: F) -> F:
    """`func` with its arguments validated against its annotations before it runs."""
    validated = validate_call(config=_CONFIG)(func)
    title = func.__qualname__
    if inspect.iscoroutinefunction(func):

        @functools.wraps(func)
        async def checked_coroutine(*args: Any, **kwargs: Any) -> Any:
            try:
                return await validated(*args, **kwargs)
            except ValidationError as exc:
                if exc.title != title:  # a model's error inside the use case is not the caller's argument
                    raise
                raise ChronicleError(described(func, exc), 2) from None

        return checked_coroutine  # type: ignore[return-value]

    @functools.wraps(func)
    def checked_call(*args: Any, **kwargs: Any) -> Any:
        try:
            return validated(*args, **kwargs)
        except ValidationError as exc:
            if exc.title != title:
                raise
            raise ChronicleError(described(func, exc), 2) from None

    return checked_call  # type: ignore[return-value]


def described(func: Callable[..., Any], exc: ValidationError) -> str:
    """One line: each bad parameter, what it needs and what it got.

    A union type (`str | Path | None`) fails once per member; those read better as the annotation."""
    parameters = inspect.signature(func).parameters
    positions = list(parameters)
    errors: dict[str, list[ErrorDetails]] = {}
    for error in exc.errors():
        where = error["loc"][0] if error["loc"] else "arguments"
        name = positions[where] if isinstance(where, int) and where < len(positions) else str(where)  # passed by position
        errors.setdefault(name, []).append(error)
    parts = []
    for name, found in errors.items():
        if found[0]["type"] == "missing_argument":
            parts.append(f"{name} is required")
            continue
        got = _shown(found[0].get("input"))
        if len(found) > 1 and name in parameters:
            annotation = parameters[name].annotation
            shown = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", str(annotation))
            needs = f"expected {shown.replace('SessionRef', 'a session id (str or UUID)')}"
        else:
            message = found[0]["msg"]
            needs = message[:1].lower() + message[1:]
        parts.append(f"{name}: {needs}, got {got}")
    method = func.__name__.removesuffix("_async")  # the blocking twin takes the same arguments
    return f"{method}(): " + "; ".join(parts)


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def blocking(name: str, twin: str, coroutine: Callable[[], Coroutine[Any, Any, T]]) -> T:
    """Run the use case to its end from synchronous code.

    Inside a running event loop `asyncio.run` cannot start another, and waiting in a thread would
    freeze the caller's loop for a whole turn; so the async program is told to await the `_async`
    twin. The coroutine is made only when it can run, so none is left never awaited.

    Closing the runner joins its loop's default executor; a sync tool function a timeout or Ctrl-C left running
    is on a thread of its own (runtime/tools/threads.py), so this returns when the turn has ended, not when it has."""
    if not in_event_loop():
        with asyncio.Runner() as runner:
            result = runner.run(coroutine())
            # Ctrl-C cancels the work's task (asyncio.Runner does that): `run` and `resume` record the cancel, then
            # raise it, which Runner turns into KeyboardInterrupt. A call that answers with the cancel instead is
            # stopped the same way here, as Ctrl-C stops any Python call (a loop over prompts would go on otherwise).
            if getattr(runner, "_interrupt_count", 0):
                raise KeyboardInterrupt from None
            return result
    raise refused_in_loop(name, twin, "blocks until the work is done")


def in_event_loop() -> bool:
    """Whether this thread is running an event loop (so a blocking call would freeze it)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def refused_in_loop(name: str, twin: str, does: str, otherwise: str = "") -> ChronicleError:
    """The ChronicleError (code 2) of a blocking form called inside a running event loop: which twin to await."""
    return ChronicleError(f"{name}() {does} and cannot run inside an event loop; use `await {twin}(...)` there{otherwise}", 2)
