"""What every command shares: opening the store, clean one-line errors, exit codes."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Iterator, NoReturn, Optional

import typer
from pydantic_core import to_jsonable_python
from rich.console import Console

from chronicle.runtime.config import ConfigError, resolve_db_url
from chronicle.runtime.store import ChronicleStore, NotFound

err_console = Console(stderr=True, highlight=False)
out_console = Console(highlight=False)

DbOption = Annotated[
    Optional[str],
    typer.Option("--db", envvar="CHRONICLE_DB", help="Database URL: sqlite:///ABS/PATH.db or postgresql://... "
                 "(default: sqlite under ./.chronicle/)", show_default=False),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output: one JSON object per line.")]
WorkspaceOption = Annotated[
    Optional[Path], typer.Option("--workspace", help="Directory the tools may touch (default: current directory)", show_default=False)
]


class CliError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def fail(message: str, code: int = 1) -> NoReturn:
    raise CliError(message, code)


def open_store(db: str | None) -> ChronicleStore:
    url = resolve_db_url(db)
    try:
        return _open_racing_others(url)
    except ConfigError as exc:
        fail(str(exc), 2)
    except Exception as exc:  # noqa: BLE001 - the driver's own words, on one line
        from chronicle.runtime.config import redact

        fail(f"cannot open the database {redact(url)}: {first_line(exc)}. Check --db / CHRONICLE_DB and that the server is running.")


def _open_racing_others(url: str, attempts: int = 5) -> ChronicleStore:
    """Several processes starting on a fresh PostgreSQL schema race to create its tables; retry that."""
    import time

    for attempt in range(attempts):
        try:
            return ChronicleStore(url)
        except Exception as exc:  # noqa: BLE001 - only the catalogue race is retried
            if attempt + 1 == attempts or not any(t in str(exc) for t in ("concurrently updated", "already exists")):
                raise
            time.sleep(0.05 * (attempt + 1))
    raise AssertionError("unreachable")


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
    except CliError as exc:
        err_console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(exc.code) from None
    except NotFound as exc:
        err_console.print(f"[red]error:[/] {exc}")
        raise typer.Exit(1) from None
