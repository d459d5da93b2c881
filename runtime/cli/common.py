"""What every command shares: opening the store, clean one-line errors, exit codes."""

from __future__ import annotations

import json
import math
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Callable, Iterator, NoReturn, Optional

import typer
from pydantic_core import to_jsonable_python
from rich.console import Console
from rich.markup import escape

from chronicle.runtime.app.errors import AppError
from chronicle.runtime.config import DEFAULT_DB_RELATIVE, ConfigError, resolve_db_url, sqlite_path
from chronicle.runtime.environment import EnvironmentSettingError, environment
from chronicle.runtime.redaction import redact_secrets
from chronicle.runtime.settings import SettingsError
from chronicle.runtime.skills import SkillError
from chronicle.runtime.store import ChronicleStore, NotFound, UnknownSession, UnreadableEvent, open_store_at

from .render import printable

# soft_wrap: an error is one line on stderr, however narrow the terminal or pipe.
err_console = Console(stderr=True, highlight=False, soft_wrap=True)
out_console = Console(highlight=False)

DbOption = Annotated[
    Optional[str],
    typer.Option("--db", envvar="CHRONICLE_DB", help="Database URL: sqlite:///REL/PATH.db (from the current directory), "
                 "sqlite:////ABS/PATH.db or postgresql://... (default: the nearest .chronicle/chronicle.db here or above, "
                 "else a new one under ./.chronicle/)", show_default=False),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output: one JSON object per line.")]
WorkspaceOption = Annotated[
    Optional[Path], typer.Option("--workspace", help="Directory the tools may touch (default: current directory)", show_default=False)
]


def finite_at_least(minimum: float) -> Callable[[typer.CallbackParam, Optional[float]], Optional[float]]:
    """A callback for a float option: `inf`, `nan` and values below `minimum` exit 2 on one line.

    click's `min=` lets `inf` and `nan` through (nan compares false with everything), and a lease
    or poll of `inf` then breaks arithmetic deep inside the worker; refuse them where they are typed.
    """

    def check(param: typer.CallbackParam, value: Optional[float]) -> Optional[float]:
        if value is None:
            return value
        if not math.isfinite(value) or value < minimum:
            flag = (param.opts or [param.name or "value"])[0]
            err_console.print(f"[red]error:[/] {flag} takes a finite number ≥ {minimum:g} (got {value!r})")
            raise typer.Exit(2)
        return value

    return check


def read_prompt(prompt: str) -> str:
    """`-` reads the prompt from stdin (`git diff | chronicle run -`), as Unix tools do."""
    if prompt != "-":
        return prompt
    if sys.stdin.isatty():
        fail("the prompt is `-` but stdin is a terminal; pipe the prompt in, or give it as an argument", 2)
    return sys.stdin.read()


class CliError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = 1) -> NoReturn:
    raise CliError(message, code)


def open_store(db: str | None, create: bool = True) -> ChronicleStore:
    """The store, after the environment is validated once for every command (a bad CHRONICLE_* value exits 2).

    `create=False` for commands that only read: they never leave a new, empty `.chronicle/` behind
    in whatever directory they happened to run in; they say where they looked instead.
    """
    try:
        environment()
    except EnvironmentSettingError as exc:
        fail(str(exc), 2)
    try:
        url = resolve_db_url(db)
    except ConfigError as exc:
        fail(str(exc), 2)
    path = sqlite_path(url)
    if not create and path is not None and not path.is_file():
        if db or os.environ.get("CHRONICLE_DB"):
            fail(f"no Chronicle store at {path}; run `chronicle run …` to start one there, or pass another --db")
        fail(f"no Chronicle store here (no {DEFAULT_DB_RELATIVE} in {Path.cwd()} or above); "
             "run `chronicle run …` to start one, or pass --db")
    try:
        return open_store_at(url)
    except ConfigError as exc:
        fail(str(exc), 2)
    except Exception as exc:  # noqa: BLE001 - the driver's own words, on one line
        from chronicle.runtime.config import redact

        if url.startswith("sqlite:"):
            fail(f"cannot open the database {redact(url)}: {first_line(exc)}. Check --db / CHRONICLE_DB.")
        fail(f"cannot open the database {redact(url)}: {postgres_cause(url, exc)}. "
             "Check --db / CHRONICLE_DB and that the server is running.")


def postgres_cause(url: str, exc: BaseException) -> str:
    """The pool says only that it got no connection in time; one direct attempt says why."""
    text = first_line(exc)
    if "couldn't get a connection" not in text:
        return text
    import psycopg

    from chronicle.runtime.config import eventsourcing_env

    env = eventsourcing_env(url)
    try:
        psycopg.connect(
            dbname=env["POSTGRES_DBNAME"], host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"],
            user=env["POSTGRES_USER"], password=env["POSTGRES_PASSWORD"] or None, connect_timeout=3,
        ).close()
    except Exception as direct:  # noqa: BLE001 - this is the cause we are looking for
        return first_line(direct)
    return text


def first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(to_jsonable_python(obj), ensure_ascii=False) + "\n")


@contextmanager
def cli_errors() -> Iterator[None]:
    """Turn expected failures into one clear line on stderr and an exit code."""
    try:
        yield
    except (CliError, AppError) as exc:
        err_console.print(f"[red]error:[/] {escape(printable(redact_secrets(str(exc))))}")
        raise typer.Exit(exc.code) from None
    except UnknownSession as exc:  # a session id as typed is an argument: a usage error, like any other
        err_console.print(f"[red]error:[/] {escape(redact_secrets(str(exc)))}")
        raise typer.Exit(2) from None
    except (NotFound, UnreadableEvent) as exc:
        err_console.print(f"[red]error:[/] {escape(printable(redact_secrets(str(exc))))}")
        raise typer.Exit(1) from None
    except (SkillError, SettingsError) as exc:
        err_console.print(f"[red]error:[/] {escape(printable(str(exc)))}")
        raise typer.Exit(2) from None
