"""Database URLs to eventsourcing environments, and where things live by default."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Literal, TypeVar
from urllib.parse import unquote, urlparse

DEFAULT_DB_RELATIVE = Path(".chronicle") / "chronicle.db"
T = TypeVar("T")


class ConfigError(ValueError):
    """A setting that cannot work; the message says what to do instead."""


def find_store(start: Path) -> Path | None:
    """The nearest `.chronicle/chronicle.db` at or above `start`, as git finds `.git`, so that
    `cd src && chronicle sessions` shows the project's sessions instead of an empty new store."""
    for folder in (start, *start.parents):
        candidate = folder / DEFAULT_DB_RELATIVE
        if candidate.is_file():
            return candidate
    return None


def default_db_url(cwd: Path | None = None) -> str:
    """The store found upward from `cwd`, else a new one under `cwd`/.chronicle/."""
    here = (cwd or Path.cwd()).resolve()
    return f"sqlite:///{find_store(here) or here / DEFAULT_DB_RELATIVE}"


#: An empty URL given on purpose (`--db "$UNSET"`, `Chronicle("")`) is refused: it used to mean the default store, so
#: a script whose variable was unset wrote to whatever `.chronicle/` its directory had. An empty CHRONICLE_DB is unset.
EMPTY_URL = ("the store URL is empty (--db '' or Chronicle('')): name a store, sqlite:///PATH.db or postgresql://…, "
             "or leave it out for the default one")


def resolve_db_url(explicit: str | None) -> str:
    if explicit is not None and not explicit.strip():
        raise ConfigError(EMPTY_URL)
    url = explicit or os.environ.get("CHRONICLE_DB") or default_db_url()
    try:  # said where the URL is read (`Chronicle(...)`, --db), not at the first call that opens the store
        refuse_path(url)
    except ConfigError as exc:
        raise ConfigError(str(exc) if explicit else f"CHRONICLE_DB: {exc}") from None
    return absolute_sqlite_url(url)


def refuse_path(url: str) -> None:
    """A file's path where a URL goes (`plain.db`, `./x.db`, `~/x.db`): ConfigError naming the URL of that file."""
    given = url.strip()
    if re.fullmatch(r"[\w./~+-]+", given):
        named = f"sqlite:///{os.path.expanduser(given).removeprefix('./')}"
        raise ConfigError(f"{url!r} is a path, not a database URL: for that SQLite file use {named} "
                          "(sqlite:/// then the path: three slashes for a relative one, four for an absolute one)")


def absolute_sqlite_url(url: str, cwd: Path | None = None) -> str:
    """SQLAlchemy's rule, made explicit: `sqlite:///rel.db` is relative to the current directory,
    `sqlite:////abs/path.db` absolute. Resolved once, where the URL is read, so every process and
    check downstream (workers, the tools' guard on the store's files) names the same file."""
    if not url.startswith("sqlite:"):
        return url
    if not url.startswith("sqlite:///"):
        raise ConfigError(f"a SQLite URL is sqlite:///RELATIVE/PATH.db or sqlite:////ABSOLUTE/PATH.db (got {url!r})")
    rest = url[len("sqlite:///"):]
    if rest.startswith("/"):
        return url
    if not rest.strip():
        raise ConfigError(f"the SQLite URL {url!r} names no file: use sqlite:///RELATIVE/PATH.db or sqlite:////ABSOLUTE/PATH.db")
    if ":memory:" in unquote(rest) or "mode=memory" in rest:
        # It would name a file called ":memory:" that eventsourcing then takes for an in-memory
        # database; the read models and other processes need a file to open.
        raise ConfigError(f"a store needs a file, not an in-memory database ({url!r}): for a throwaway store use a "
                          "temporary file, like sqlite:////tmp/scratch.db")
    return f"sqlite:///{((cwd or Path.cwd()) / unquote(rest)).resolve()}"


def root_reading(url: str) -> Path | None:
    """The existing file a relative SQLite URL names when read from the root instead (`sqlite:///tmp/a.db`
    written for /tmp/a.db: one slash short, the usual slip), for a message about the missing file
    the URL does name; None for any other URL, or when there is no such file."""
    if not url.startswith("sqlite:///") or url.startswith("sqlite:////"):
        return None
    meant = Path("/" + unquote(url[len("sqlite:///"):]))
    return meant if meant.is_file() else None


def sqlite_path(url: str) -> Path | None:
    """The file a SQLite URL names (None for other databases)."""
    if not url.startswith("sqlite:"):
        return None
    return Path(unquote(absolute_sqlite_url(url)[len("sqlite:///"):]))


def eventsourcing_env(url: str) -> dict[str, str]:
    try:
        parsed = urlparse(url)
        port = parsed.port  # a port that is not a number or is out of range raises here, as does an unclosed "[::1"
    except ValueError as exc:
        raise ConfigError(f"malformed database URL {_shown(url)}: {exc}; use sqlite:///RELATIVE/PATH.db, "
                          "sqlite:////ABSOLUTE/PATH.db or postgresql://user@host:port/dbname") from None
    env = {"AGGREGATE_CACHE_MAXSIZE": "2000", "CREATE_TABLE": "y"}
    if parsed.scheme == "sqlite":
        path = sqlite_path(url) or Path()
        path.parent.mkdir(parents=True, exist_ok=True)
        env.update(PERSISTENCE_MODULE="eventsourcing.sqlite", SQLITE_DBNAME=str(path),
                   SQLITE_LOCK_TIMEOUT=str(sqlite_busy_timeout()))
        return env
    if parsed.scheme in ("postgresql", "postgres", "postgresql+psycopg"):
        from .pg_options import url_options

        options = url_options(parsed.query)  # first: a message below echoes the URL, which must hold no unchecked option
        if port == 0:  # read as "no port" below, which would have meant 5432
            raise ConfigError(f"PostgreSQL URL has port 0 (got {redact(url)!r}); give the server's port, like :5432")
        dbname = (parsed.path or "/").lstrip("/")
        if not dbname:
            raise ConfigError(f"PostgreSQL URL needs a database name, like postgresql://user@host:5432/db (got {redact(url)!r})")
        env.update(
            PERSISTENCE_MODULE="eventsourcing.postgres",
            POSTGRES_DBNAME=dbname,
            POSTGRES_HOST=parsed.hostname or "127.0.0.1",
            POSTGRES_PORT=str(port or 5432),
            POSTGRES_USER=unquote(parsed.username or "postgres"),
            POSTGRES_PASSWORD=unquote(parsed.password or ""),
            # eventsourcing retries a lost connection 10 times, so an outage shorter than about
            # 10 x this timeout is ridden out; a longer one fails the operation with a clear error.
            POSTGRES_CONNECT_TIMEOUT=_pg_connect_timeout(),
            # Connections made on demand (up to 8): a pool of 4 opened four (a server process and
            # a login each) before a CLI read could use one, and a pool of 1 two, as its first
            # client asked while the pool was still making the one it keeps (it grows for a
            # waiting client). Idle ones close after psycopg_pool's max_idle (10 minutes).
            POSTGRES_POOL_SIZE="0",
            POSTGRES_MAX_OVERFLOW="8",
            # No ping before each checkout: it was an extra round trip and a server-side transaction
            # (an empty query is one) for every connection taken, ~2.5 per LLM step. A connection
            # that died in the pool fails its first statement instead, which eventsourcing retries
            # on another one (the pool drops a broken connection when it is returned).
            POSTGRES_PRE_PING="n",
        )
        if "schema" in options:  # the other options are libpq's, sent with every login (runtime/pg_options.py)
            env["POSTGRES_SCHEMA"] = options["schema"]
        return env
    refuse_path(url)  # a file's path where a URL goes: name the URL of that file
    raise ConfigError(f"unsupported database URL {_shown(url)}: use sqlite:///RELATIVE/PATH.db, sqlite:////ABSOLUTE/PATH.db "
                      "or postgresql://user@host:port/dbname")


def _shown(url: str) -> str:
    """The URL for a message about it, its password masked. Without a scheme the password is not where a URL
    keeps it (`user:pw@host/db`, libpq's `password=pw`), so redaction cannot find it: such a value is not
    echoed at all; nor is a query that may name one (`?password=`)."""
    if "://" in url and "password=" not in url.lower() or not re.search(r"[@=]", url):
        return repr(redact(url))
    return "(not shown: it may hold a password)"


def checking_writes() -> bool:
    """CHRONICLE_CHECK_EVENTS, set to anything but 0: a store checks every event against the stored
    vocabulary before writing it (runtime/stored_vocabulary.py). Read here, not there, because every
    store reads it when it opens and the vocabulary's modules are not worth importing for that."""
    return os.environ.get("CHRONICLE_CHECK_EVENTS", "") not in ("", "0")


def redact(url: str) -> str:
    """A URL fit for messages and logs: the password never leaves the process."""
    from .redaction import redact_secrets  # also a password holding an unencoded "/", "#" or "?"

    return redact_secrets(url)


#: CHRONICLE_DURABILITY: "effects" (commits that hold only work a resume runs again do not wait
#: for the disk) or "every-commit" (each commit waits for it).
DEFAULT_DURABILITY: Literal["effects", "every-commit"] = "effects"


def relaxed_commits() -> bool:
    """Whether a commit that records only re-runnable work may skip waiting for the disk.

    Inside a running turn, a model's response and the results of read-only or idempotent tools
    are work that resume does again if it is missing. Their commits are written (a killed process
    keeps them) but not flushed to the disk: a power cut or an OS crash can lose them, never
    anything after them, because the log on disk is a prefix. Every commit that something outside
    the log may rely on still waits: a call that must not run twice (before it runs and when it
    ends), a user's message, an approval wait, a turn's end, a session's creation. SQLite flushes
    at least once a second all the same; PostgreSQL's WAL writer does (`synchronous_commit = off`
    for that transaction). LangGraph's default (`durability="async"`) writes a step's checkpoint
    while the next step runs, which a killed process can lose; this keeps it."""
    return _setting("durability", DEFAULT_DURABILITY) == "effects"


def _setting(field: str, default: T) -> T:
    """A CHRONICLE_* setting, read through the validated environment only when it is set:
    pydantic-settings costs every command ≈ 40 ms of imports, for a value usually the default."""
    if not any(name.upper() == f"CHRONICLE_{field.upper()}" for name in os.environ):
        return default
    from .environment import EnvironmentSettingError, environment

    try:
        return getattr(environment(), field)  # type: ignore[no-any-return]
    except EnvironmentSettingError as exc:
        raise ConfigError(str(exc)) from None


#: Seconds to wait for a PostgreSQL connection (CHRONICLE_PG_CONNECT_TIMEOUT).
PG_CONNECT_TIMEOUT_S = 5.0


def _pg_connect_timeout() -> str:
    return f"{_setting('pg_connect_timeout', PG_CONNECT_TIMEOUT_S):g}"


#: Seconds a SQLite write waits for another process's lock before it fails (CHRONICLE_SQLITE_BUSY_TIMEOUT).
SQLITE_BUSY_TIMEOUT_S = 30


def sqlite_busy_timeout() -> int:
    """Whole seconds (eventsourcing's SQLITE_LOCK_TIMEOUT takes an integer): long enough by default for
    another process's commit, short enough when set for a program that would rather fail at once and
    `resume` than hold a turn behind a process that keeps the file locked."""
    return int(_setting("sqlite_busy_timeout", SQLITE_BUSY_TIMEOUT_S))
