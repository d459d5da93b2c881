"""What every command shares: opening the store, clean one-line errors, exit codes."""

from __future__ import annotations

import json
import math
import os
import re
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Callable, Iterable, Iterator, NoReturn, Optional

import typer
from rich.markup import escape

from chronicle.runtime.app.errors import NO_STORE, AppError, known_failure
from chronicle.runtime.app.errors import READ_ONLY_WRITE as READ_ONLY_WRITE  # where the CLI looked for it
from chronicle.runtime.app.store_location import missing_store as missing_store_error
from chronicle.runtime.config import ConfigError, resolve_db_url, sqlite_path
from chronicle.runtime.pasteable import pasteable
from chronicle.runtime.redaction import redact_secrets

from .render import SafeConsole, ascii_json, printable

if TYPE_CHECKING:  # imported where a store is opened: it imports the domain, which `sessions` may not need
    from chronicle.runtime.store import ChronicleStore

# soft_wrap: an error is one line on stderr, however narrow the terminal or pipe. emoji=False: a
# ":smile:" in a message or a tool's output is shown as written, not as the emoji rich would put there.
# SafeConsole: no control character a model or a tool wrote reaches the terminal (render.py).
err_console = SafeConsole(stderr=True, highlight=False, soft_wrap=True, emoji=False)
out_console = SafeConsole(highlight=False, emoji=False)

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
#: For commands that only read the workspace's chronicle.toml (its routines), where no tool runs.
ConfigWorkspaceOption = Annotated[
    Optional[Path], typer.Option("--workspace", help="Directory whose chronicle.toml is read (default: current directory)", show_default=False)
]


class RowCount(typer._click.types.IntParamType):  # type: ignore[name-defined,misc]
    """How many rows to show (`audit --limit`/`--last`): at least 1; one beyond any row count means all of them, so
    a huge one is taken as the largest the stores hold instead of refused (runtime/bounds.py)."""

    def convert(self, value: Any, param: Any, ctx: Any) -> int:
        from chronicle.runtime.bounds import LARGEST

        number = int(super().convert(value, param, ctx))
        if number < 1:
            self.fail(f"{number} is not in the range x>=1.", param, ctx)
        return min(number, LARGEST)


def finite_at_least(minimum: float, maximum: float | None = None,
                    said: str = "") -> Callable[[typer.CallbackParam, Optional[float]], Optional[float]]:
    """A callback for a float option: `inf`, `nan` and values below `minimum` (or above `maximum`) exit 2 on one line.

    click's `min=` lets `inf` and `nan` through (nan compares false with everything), and a lease
    or poll of `inf` then breaks arithmetic deep inside the worker; refuse them where they are typed.
    `said`: what the maximum is, for the error line (`a day`).
    """

    def check(param: typer.CallbackParam, value: Optional[float]) -> Optional[float]:
        if value is None:
            return value
        if not math.isfinite(value) or value < minimum or (maximum is not None and value > maximum):
            flag = (param.opts or [param.name or "value"])[0]
            most = f" and ≤ {maximum:g}{f' ({said})' if said else ''}" if maximum is not None else ""
            err_console.print(f"[red]error:[/] {flag} takes a finite number ≥ {minimum:g}{most} (got {value!r})")
            raise typer.Exit(2)
        return value

    return check


#: What Python makes of a byte that is not UTF-8 in an argument, a path or stdin (surrogateescape): a lone surrogate.
SURROGATE = re.compile("[\ud800-\udfff]")


def utf8_text(text: str, what: str) -> str:
    """`text` as the model and the store take it, UTF-8: each byte that was not UTF-8 (`chronicle run $'caf\\xe9'`, a
    latin-1 file piped in) becomes U+FFFD, said once on stderr naming `what`. Recording it as it came failed with an
    internal error after the store was created; refusing it would refuse every `git diff` that touches a latin-1 file."""
    if text.isascii() or not SURROGATE.search(text):
        return text
    count = len(SURROGATE.findall(text))
    err_console.print(f"note: {escape(what)} held {count} byte{'s that are' if count != 1 else ' that is'} not UTF-8: "
                      f"{'each is' if count != 1 else 'it is'} taken as U+FFFD (\ufffd)", soft_wrap=True)
    return SURROGATE.sub("\ufffd", text)


def not_empty(param: typer.CallbackParam, value: Optional[str]) -> Optional[str]:
    """A callback for a text option that filters or names something: an empty one (`--tool ''`, which a script
    gives when its variable is unset) is refused, exit 2, not taken as no filter at all."""
    if value is not None and not value.strip():
        flag = (param.opts or [param.name or "value"])[0]
        err_console.print(f"[red]error:[/] {flag} is empty: give a value, or leave {flag} out")
        raise typer.Exit(2)
    return value


def read_prompt(prompt: str) -> str:
    """`-` reads the prompt from stdin (`git diff | chronicle run -`), as Unix tools do; either way, as UTF-8 text."""
    if prompt != "-":
        return utf8_text(prompt, "the prompt")
    if sys.stdin.isatty():
        fail("the prompt is `-` but stdin is a terminal; pipe the prompt in, or give it as an argument", 2)
    lenient(sys.stdin)
    return utf8_text(sys.stdin.read(), "the prompt read from stdin")


def lenient(stream: Any) -> None:
    """Read bytes that are not UTF-8 as lone surrogates (for `utf8_text`), not as a UnicodeDecodeError, which a UTF-8
    locale other than C.UTF-8 gives: `errors` is `strict` there."""
    try:
        stream.reconfigure(errors="surrogateescape")
    except (AttributeError, ValueError, OSError):  # not a TextIOWrapper (a test's), or read from already: as it is
        pass


class CliError(Exception):
    def __init__(self, message: str, code: int = 1) -> None:
        super().__init__(message)
        self.code = code


def log_line(line: str) -> None:
    """A line of a long-running process's log (`chronicle worker`'s, `chronicle serve`'s worker's) on stderr, as it is
    written: no markup read in it (a session's words may hold brackets), no colours, one line however long."""
    err_console.print(line, markup=False, highlight=False)


def fail(message: str, code: int = 1) -> NoReturn:
    raise CliError(message, code)


def open_store(db: str | None, create: bool = True) -> ChronicleStore:
    """The store, after the environment is validated once for every command (a bad CHRONICLE_* value exits 2).

    `create=False` for commands that read, or act on what a store already holds (a session to undo,
    steer or approve, a job to cancel): they never leave a new, empty `.chronicle/` behind in
    whatever directory they happened to run in; they say where they looked instead. Only commands
    that record something new (run, chat, submit, import, a worker, a routine fired) create one.
    """
    return open_located(*locate_store(db, create), create=create)


def locate_store(db: str | None, create: bool = True) -> tuple[str, bool]:
    """(URL, read-only) of the store `--db` / CHRONICLE_DB name, after the checks every command makes
    before opening it; `open_located` opens it. Apart so that `sessions` can read the read models
    without opening the store (runtime/app/session_listing.py) and still fail as every command does."""
    if environment_is_set():
        from chronicle.runtime.environment import EnvironmentSettingError, environment

        try:
            environment()
        except EnvironmentSettingError as exc:
            fail(str(exc), 2)
    try:
        url = resolve_db_url(db)
    except ConfigError as exc:
        fail(str(exc), 2)
    path = sqlite_path(url)
    read_only = False
    if path is not None and path.is_file() and not writable(path):
        if create:  # a command that records: say so now, not as a driver error halfway through
            fail(f"the store {path} is read-only (the file, its directory or its mount cannot be written); "
                 "read commands (sessions, log, history) still work — copy it somewhere writable to continue")
        read_only = True
    if not create and (missing := missing_store_error(url, db or os.environ.get("CHRONICLE_DB"))) is not None:
        raise missing  # the library's readers refuse it too, in the same words (runtime/app/store_location.py)
    LOCATED[:] = [url]
    return url, read_only


#: The URL of the store this process's command located last (`locate_store`): named by an error line about the store
#: (a damaged file, a full disk, a held lock), which is raised far from the command that knows its `--db`.
LOCATED: list[str] = []


def located_url() -> str | None:
    return LOCATED[-1] if LOCATED else None


def pasted(args: str, url: str | None) -> str:
    """`chronicle ARGS` to paste for the store at `url` (runtime/pasteable.py), escaped for rich's markup."""
    return escape(pasteable(args, url))


def hint(args: str, db: str | None) -> str:
    """`pasted`, for a command that has no store open to ask its URL: the store `--db` / CHRONICLE_DB / the
    default lookup names, as `open_store` would open it."""
    try:
        url: str | None = resolve_db_url(db)
    except ConfigError:
        url = None
    return pasted(args, url)


def missing_store(db: str | None) -> Path | None:
    """The SQLite file `--db` / CHRONICLE_DB / the default name when it does not exist (None for an
    existing file, PostgreSQL, or a URL `open_store` will refuse itself): for a command to which no
    store means nothing to do, such as `resume --all` at a machine's start."""
    try:
        path = sqlite_path(resolve_db_url(db))
    except ConfigError:
        return None
    return path if path is not None and not path.is_file() else None


def open_located(url: str, read_only: bool = False, create: bool = True) -> ChronicleStore:
    """Open the store `locate_store` found; a failure is one line (runtime/store_open.py says it). `create=False`
    as `locate_store`'s: a PostgreSQL database or schema without a store is refused there, as a missing SQLite
    file is before."""
    from chronicle.runtime.collector import start_up_done
    from chronicle.runtime.store_open import open_store

    try:
        store = open_store(url, read_only=read_only, create=create)
    except AppError as exc:
        if exc.kind == NO_STORE:
            raise  # as it is, for a command to which no store means nothing to do (`resume --all`)
        fail(str(exc), exc.code)
    start_up_done()  # the command's own work starts here: cli/entry.py held collections back until now
    return store


#: Variables that are not settings of `runtime/environment.py` (each read where it is used).
NOT_SETTINGS = frozenset({"CHRONICLE_DB", "CHRONICLE_DEBUG", "CHRONICLE_TEST_PG", "CHRONICLE_REQUIRE_PG",
                          "CHRONICLE_TEST_HALT_BEFORE_FILE_WRITES"})  # test-only: runtime/undo_redo.py


def environment_is_set() -> bool:
    """Whether any variable `environment()` might refuse is set (any other CHRONICLE_*, ANTHROPIC_BASE_URL).

    With none, the defaults hold and there is nothing to check: pydantic-settings (and the
    asyncio and cloud sources it imports) would cost a read command a fifth of its start-up."""
    return any(
        (upper.startswith("CHRONICLE_") and upper not in NOT_SETTINGS) or upper == "ANTHROPIC_BASE_URL"
        for upper in map(str.upper, os.environ)
    )


def writable(path: Path) -> bool:
    """Whether SQLite could write this store: the file and its directory (for the WAL files).
    access() answers for root too when the file is immutable or the mount read-only."""
    return os.access(path, os.W_OK) and os.access(path.parent, os.W_OK)


NoPagerOption = Annotated[bool, typer.Option("--no-pager", help="Print straight to the terminal instead of through $PAGER (less)")]


@contextmanager
def paged(no_pager: bool = False) -> Iterator[None]:
    """Long human output through a pager, as git does: only when stdout is a terminal, never for
    --json or a pipe. `less -FRX` by default: output that fits on one screen is printed as is."""
    if no_pager or not out_console.is_terminal:
        yield
        return
    os.environ.setdefault("LESS", "FRX")
    with out_console.pager(styles=True):
        yield


def replace_file(path: Path, text: str) -> None:
    """Write `text` to `path` whole or not at all: into a new file beside it, then renamed over it. A kill or a
    full disk mid-write leaves the file that was there (an earlier export, say) as it was, never a truncated one."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(temp, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise


def print_json(obj: Any) -> None:
    from ..jsonable import jsonable

    sys.stdout.write(json.dumps(jsonable(obj), ensure_ascii=ascii_json()) + "\n")


def print_json_rows(rows: Iterable[Any]) -> None:
    """`--json` of a listing: one object per line."""
    for row in rows:
        print_json(row)


@contextmanager
def store_command(db: str | None, create: bool = True) -> Iterator[ChronicleStore]:
    """The preamble of every command that uses the store: failures as one line with an exit code
    (cli_errors), then the store, opened as `--db` / CHRONICLE_DB say (`create=False` to read only)."""
    with cli_errors():
        yield open_store(db, create=create)


@contextmanager
def workspace_command(workspace: Path | None) -> Iterator[Path]:
    """The preamble of a command that works on a workspace: cli_errors, then `--workspace` resolved."""
    from chronicle.runtime.app.specs import resolve_workspace

    with cli_errors():
        yield resolve_workspace(workspace)


@contextmanager
def cli_errors() -> Iterator[None]:
    """Turn expected failures into one clear line on stderr and an exit code."""
    try:
        yield
    except (CliError, AppError) as exc:
        err_console.print(f"[red]error:[/] {escape(printable(redact_secrets(str(exc))))}")
        raise typer.Exit(exc.code) from None
    except Exception as exc:
        known = known_failure(exc, located_url())  # the library's ChronicleError for it has the same words and code
        if known is None:
            raise
        err_console.print(f"[red]error:[/] {escape(printable(redact_secrets(str(known))))}")
        raise typer.Exit(known.code) from None


