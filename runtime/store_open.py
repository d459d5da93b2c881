"""Opening a store for someone who needs one clear failure, not a driver's traceback.

The CLI prints it as its one `error:` line and the library raises it as `ChronicleError`
(`Chronicle(...)` opens its store on first use), with the same words and code: 2 for a setting
that cannot work (a malformed URL, a wrong cipher key), 1 for a database that would not open,
with what to do next. Before, the library raised eventsourcing's OperationalError or the pool's
timeout for a server that was down, which a program catching `ChronicleError` let through.
"""

from __future__ import annotations

from .app.errors import NO_STORE, AppError, first_line
from .app.store_location import no_store_in
from .config import ConfigError, redact
from .store import ChronicleStore, open_store_at
from .store_errors import StoreDamaged
from .store_identity import NoStore


def open_store(url: str, read_only: bool = False, create: bool = True, client: str = "cli") -> ChronicleStore:
    """The store at `url`, or AppError with what went wrong and what to do next. `create=False` for a reader: a
    PostgreSQL database or schema without a store is refused (code 1, in `client`'s words) and left as it was."""
    try:
        return open_store_at(url, read_only=read_only, create=create)
    except NoStore as exc:
        raise AppError(no_store_in(exc.where, url, client), 1, kind=NO_STORE) from None
    except StoreDamaged as exc:
        raise AppError(str(exc), 1) from None
    except ConfigError as exc:
        raise AppError(str(exc), 2) from None
    except Exception as exc:  # noqa: BLE001 - the driver's own words, on one line
        raise AppError(open_failure(url, exc), 1) from exc


def told_at_once_when_refused(store: ChronicleStore) -> None:
    """For a process that keeps its store open (the server, a worker): on PostgreSQL, a database dropped or a login
    refused under it is told in half a second, as `DatabaseRefused`, not after ten pool timeouts of retries (52 s)
    that ended in the pool's "couldn't get a connection"; and a database dropped and created again under it is
    refused until a restart (`store_gone`; runtime/pg_datastore.py). Nothing on SQLite."""
    if store.backend == "postgresql":
        from .pg_datastore import fails_fast_when_refused

        fails_fast_when_refused(store.recorder.datastore)


def store_gone(store: ChronicleStore) -> Exception | None:
    """The error every use of the store raises from now on when only a restart cures it, for a process that must not
    go on with it (a worker's idle passes, the server's routes and /healthz); None otherwise. On SQLite, its file
    deleted or replaced under this process (runtime/sqlite_pool.py); on PostgreSQL, its database dropped and created
    again, as a long-lived process's store finds it (`told_at_once_when_refused`, runtime/pg_datastore.py)."""
    datastore = store.recorder.datastore
    if store.backend == "sqlite":
        from .sqlite_pool import file_gone

        return file_gone(datastore)
    replaced = getattr(datastore, "replaced", None)
    return replaced() if callable(replaced) else None


def open_failure(url: str, exc: BaseException) -> str:
    """Why the store at `url` did not open, and what to check."""
    if url.startswith("sqlite:"):
        if (free := free_bytes_if_full(url)) is not None:
            # SQLite says only "disk I/O error" when it cannot grow its -shm file (it leaves 3 bytes of it)
            return (f"cannot open the database {redact(url)}: the disk holding it is full ({free} bytes free; SQLite said: "
                    f"{first_line(exc)}); free some space, then run the command again. What was recorded stays whole.")
        return f"cannot open the database {redact(url)}: {first_line(exc)}. Check --db / CHRONICLE_DB."
    cause = postgres_cause(url, exc)
    return f"cannot open the database {redact(url)}: {cause}. {postgres_advice(url, cause)}"


#: Free bytes under which a SQLite store's disk counts as full: less than SQLite needs for its shared-memory file.
FULL_BELOW = 64 * 1024


def free_bytes_if_full(url: str) -> int | None:
    """The bytes free on the disk holding a SQLite store's file when they are fewer than `FULL_BELOW`, else None
    (enough room, not SQLite, or a directory that cannot be asked)."""
    import os

    from .config import sqlite_path

    try:
        path = sqlite_path(url)
        stats = os.statvfs(path.parent) if path is not None else None
    except (OSError, ValueError):
        return None
    if stats is None:
        return None
    free = stats.f_bavail * stats.f_frsize
    return free if free < FULL_BELOW else None


def postgres_cause(url: str, exc: BaseException) -> str:
    """The pool says only that it got no connection in time; one direct attempt says why."""
    text = first_line(exc)
    if "couldn't get a connection" not in text:
        return text
    from .pg_options import connect, login

    try:
        connect(login(url), connect_timeout=3).close()
    except Exception as direct:  # noqa: BLE001 - this is the cause we are looking for
        return first_line(direct)
    return text


def postgres_advice(url: str, cause: str) -> str:
    """What to do next about a PostgreSQL store that would not open, by what the server said."""
    from .pg_datastore import refusal  # psycopg is loaded already: the open used it

    refused = refusal(cause)
    if refused == "database":
        from .config import eventsourcing_env

        env = eventsourcing_env(url)
        return (f"Create it first (createdb -h {env['POSTGRES_HOST']} -p {env['POSTGRES_PORT']} -U {env['POSTGRES_USER']} "
                f"{env['POSTGRES_DBNAME']}), or point --db / CHRONICLE_DB at an existing database.")
    if refused == "closed":
        return ("The database takes no logins now (ALTER DATABASE … ALLOW_CONNECTIONS, or this user's CONNECT privilege): "
                "ask its administrator to open it, or point --db / CHRONICLE_DB at another.")
    if refused == "full":
        return ("PostgreSQL refuses connections at its limit: free connections (other clients, idle sessions), or raise "
                "max_connections / the role's or database's CONNECTION LIMIT.")
    if refused == "login":
        return "Check the user name and its password in the URL given by --db / CHRONICLE_DB."
    if refused == "tls":
        return ("Check the TLS options of the URL given by --db / CHRONICLE_DB (sslmode, sslrootcert, …) and any PGSSL* "
                "variables against what the server offers.")
    return "Check --db / CHRONICLE_DB and that the server is running."

