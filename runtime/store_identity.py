"""Refuse to open a database that holds another application's data.

eventsourcing creates its tables with `CREATE TABLE IF NOT EXISTS`, so pointed at a database
that already has a `stored_events` table of another program, or at an application's own
PostgreSQL schema, it would quietly write Chronicle's events and projections beside that data
(and choke later on rows it cannot decode). The check runs before any table is created and
looks only at what is there: an events table whose rows are not Chronicle's, or tables of which
none is Chronicle's.
"""

from __future__ import annotations

import contextlib
import sqlite3
from pathlib import Path
from typing import Any

from .app.errors import first_line
from .config import ConfigError
from .store_errors import StoreDamaged, damage_advice, is_damaged

#: Every event Chronicle stores has a topic under its own package.
OUR_TOPIC = "chronicle."


class ForeignDatabase(ConfigError):
    """The database belongs to something else; the message says what was found and what to do."""


class NoStore(Exception):
    """A PostgreSQL database and schema with no Chronicle store, opened by something that only reads or acts on
    what a store holds (`ChronicleStore(create=False)`): nothing was created there. `where` names what was looked
    at (database, schema, server; never the password); the client says what to do (app/store_location.py)."""

    def __init__(self, where: str) -> None:
        super().__init__(f"no Chronicle store in {where}")
        self.where = where


def read_only_sqlite_uri(path: Path) -> str:
    """A URI that opens the file for reading only. `mode=ro` still needs the WAL's shared-memory
    file, which a read-only directory cannot hold; then `immutable=1` (nothing can write it anyway)."""
    from urllib.parse import quote

    uri = f"file:{quote(str(path))}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        return uri
    except sqlite3.Error:
        return f"file:{quote(str(path))}?immutable=1"


#: PostgreSQL: one row per recorder whose tables were set up, naming its DDL (runtime/schema_marks.py).
MARKS_TABLE = "chronicle_schema_marks"


def check_store(settings: dict[str, str]) -> None:
    """Refuse another application's SQLite file. PostgreSQL is checked by `check_postgres` on the
    store's own first pooled connection (ChronicleStore.construct_factory)."""
    if settings.get("PERSISTENCE_MODULE") == "eventsourcing.sqlite":
        _check_sqlite(Path("/" + settings["SQLITE_DBNAME"].lstrip("/")))


def _check_sqlite(path: Path) -> None:
    if not path.exists() or path.stat().st_size == 0:
        return
    try:  # the path has one leading slash: in a URI "file://x" would name a host
        conn = sqlite3.connect(read_only_sqlite_uri(path), uri=True)
    except sqlite3.Error:
        return  # cannot look: let the store's own open report the real problem
    try:
        try:
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        except sqlite3.DatabaseError as exc:
            if _has_sqlite_header(path):  # SQLite's file, damaged (truncated, overwritten): not somebody else's
                raise StoreDamaged(f"the store {path} is damaged ({exc}): {damage_advice(path)}") from None
            raise ForeignDatabase(f"{path} is not an SQLite database Chronicle can use ({exc}); "
                                  "point --db / CHRONICLE_DB at a Chronicle store or a new file") from None
        if not tables:
            return
        if "stored_events" not in tables:
            raise ForeignDatabase(_not_ours(str(path), tables, "use a new file, e.g. --db sqlite:////ABS/PATH/chronicle.db"))
        _check_topics(str(path), lambda table: conn.execute(_ends(table, "rowid")).fetchall(), "stored_events")
    finally:
        conn.close()


#: The first 16 bytes of every SQLite database file.
SQLITE_HEADER = b"SQLite format 3\x00"


def _has_sqlite_header(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            return handle.read(len(SQLITE_HEADER)) == SQLITE_HEADER
    except OSError:
        return False


def check_postgres(datastore: Any, events_table: str, own_schema: bool, create: bool = True) -> frozenset[str]:
    """Refuse another application's tables in the store's schema; create the schema on first use
    when the URL named one (`own_schema`, `?schema=NAME`); return the schema marks of the tables
    already set up there (runtime/schema_marks.py). With `create=False` (a command that only reads),
    a schema without tables, or none at all, is `NoStore` and nothing is created: a reader used to
    create the whole store, so that a mistyped schema read as an empty store and `verify` passed on it.

    On a connection of the store's own pool, before any recorder is built: a connection of its own
    cost every open a second login and server process (≈ 3 ms here, more to a remote server),
    then closed. A database, role or password that does not exist fails here at once; a server
    that cannot be reached fails after the pool's timeout, which the CLI explains
    (`store_open.postgres_cause`)."""
    from psycopg import sql
    from psycopg.rows import tuple_row

    from .pg_datastore import first_connection, keep_login_options_if_held

    schema = datastore.schema or "public"
    where = f"database {datastore.pool.kwargs.get('dbname')!r}, schema {schema!r}"
    with first_connection(datastore) as conn, conn.cursor(row_factory=tuple_row) as cursor:
        # The catalog itself: information_schema.tables answers the same (tables, views, foreign
        # tables) through privilege checks per row, ≈ 2 ms more on a new connection, at every open.
        # Beside it, the search path the login asked for, which says whether the login's options held.
        cursor.execute(
            "SELECT current_setting('search_path'), ARRAY(SELECT c.relname::text FROM pg_catalog.pg_class c "
            "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f'))",
            (schema,),
        )
        search_path, names = cursor.fetchone() or ("", [])
        keep_login_options_if_held(datastore, search_path)
        tables = set(names)
        if not tables:
            if not create:
                kwargs = datastore.pool.kwargs
                raise NoStore(f"{where} on {kwargs.get('host')}:{kwargs.get('port')}")
            if own_schema:  # `?schema=NAME` names a schema of our own: made on first use
                cursor.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
            return frozenset()
        if events_table not in tables:
            raise ForeignDatabase(_not_ours(where, tables, "use an empty database, or a schema of Chronicle's own: "
                                                          "add ?schema=chronicle to the URL"))
        qualified = sql.SQL("{}.{}").format(sql.Identifier(schema), sql.Identifier(events_table)).as_string(conn)
        _check_topics(where, lambda _: cursor.execute(_ends(qualified, "notification_id").encode()).fetchall(), events_table)
        if MARKS_TABLE not in tables:
            return frozenset()
        cursor.execute(sql.SQL("SELECT mark, tables FROM {}.{}").format(sql.Identifier(schema), sql.Identifier(MARKS_TABLE)))
        # A mark counts only while every table it set up is still there.
        return frozenset(mark for mark, names in cursor.fetchall() if set(names) <= tables)


def _check_topics(where: str, run: Any, table: str) -> None:
    """The oldest and the newest event must be Chronicle's. Two indexed rows, not a search of every
    row for a foreign topic: that scanned the whole events table at every open (≈ 20 ms at 100k
    events), and an application's events table holds that application's events from its first row."""
    try:
        rows = run(table)
    except Exception as exc:  # noqa: BLE001 - a table of that name with other columns is not ours either
        if is_damaged(exc):  # ours, damaged where its first or last rows are
            raise StoreDamaged(f"the store {where} is damaged ({first_line(exc)}): {damage_advice(where)}") from None
        raise ForeignDatabase(f"{where}: table {table!r} is not a Chronicle events table ({str(exc).splitlines()[0]}); "
                              "point --db / CHRONICLE_DB at a Chronicle store or a new database") from None
    foreign = [topic for (topic,) in rows if not str(topic).startswith(OUR_TOPIC)]
    if foreign:
        raise ForeignDatabase(f"{where}: table {table!r} holds events of another application (topic {foreign[0]!r}); "
                              "Chronicle will not write beside them. Use a new database or schema.")


def _ends(table: str, position: str) -> str:
    """The topics of a table's first and last rows by `position`."""
    return (f"SELECT topic FROM (SELECT topic FROM {table} ORDER BY {position} LIMIT 1) AS oldest UNION ALL "
            f"SELECT topic FROM (SELECT topic FROM {table} ORDER BY {position} DESC LIMIT 1) AS newest")


def _not_ours(where: str, tables: set[str], advice: str) -> str:
    shown = ", ".join(sorted(tables)[:5]) + (" …" if len(tables) > 5 else "")
    return f"{where} holds {len(tables)} table(s) of another application ({shown}) and no Chronicle store; {advice}"
