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

from .config import ConfigError

#: Every event Chronicle stores has a topic under its own package.
OUR_TOPIC = "chronicle."


class ForeignDatabase(ConfigError):
    """The database belongs to something else; the message says what was found and what to do."""


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


def check_store(settings: dict[str, str], app_name: str) -> None:
    if settings.get("PERSISTENCE_MODULE") == "eventsourcing.sqlite":
        _check_sqlite(Path("/" + settings["SQLITE_DBNAME"].lstrip("/")))
    elif settings.get("PERSISTENCE_MODULE") == "eventsourcing.postgres":
        _check_postgres(settings, f"{app_name}_events")


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
            raise ForeignDatabase(f"{path} is not an SQLite database Chronicle can use ({exc}); "
                                  "point --db / CHRONICLE_DB at a Chronicle store or a new file") from None
        if not tables:
            return
        if "stored_events" not in tables:
            raise ForeignDatabase(_not_ours(str(path), tables, "use a new file, e.g. --db sqlite:////ABS/PATH/chronicle.db"))
        _check_topics(str(path), lambda sql: conn.execute(sql).fetchall(), "stored_events")
    finally:
        conn.close()


def _check_postgres(settings: dict[str, str], events_table: str) -> None:
    import psycopg

    schema = settings.get("POSTGRES_SCHEMA") or "public"
    try:
        conn = psycopg.connect(
            dbname=settings["POSTGRES_DBNAME"], host=settings["POSTGRES_HOST"], port=settings["POSTGRES_PORT"],
            user=settings["POSTGRES_USER"], password=settings["POSTGRES_PASSWORD"] or None,
            connect_timeout=int(float(settings.get("POSTGRES_CONNECT_TIMEOUT", "5"))), autocommit=True,
        )
    except psycopg.Error:
        return  # the store's own connection attempt says why, with its retries
    where = f"database {settings['POSTGRES_DBNAME']!r}, schema {schema!r}"
    with conn:
        tables = {
            name for (name,) in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,)
            ).fetchall()
        }
        if not tables:
            return
        if events_table not in tables:
            raise ForeignDatabase(_not_ours(where, tables, "use an empty database, or a schema of Chronicle's own: "
                                                          "add ?schema=chronicle to the URL"))
        from psycopg import sql

        query = sql.SQL("SELECT topic FROM {}.{} WHERE topic NOT LIKE %s LIMIT 1").format(
            sql.Identifier(schema), sql.Identifier(events_table)
        )
        _check_topics(where, lambda _: conn.execute(query, (OUR_TOPIC + "%",)).fetchall(), events_table)


def _check_topics(where: str, run: Any, table: str) -> None:
    try:
        foreign = run(f"SELECT topic FROM {table} WHERE topic NOT LIKE '{OUR_TOPIC}%' LIMIT 1")
    except Exception as exc:  # noqa: BLE001 - a table of that name with other columns is not ours either
        raise ForeignDatabase(f"{where}: table {table!r} is not a Chronicle events table ({str(exc).splitlines()[0]}); "
                              "point --db / CHRONICLE_DB at a Chronicle store or a new database") from None
    if foreign:
        raise ForeignDatabase(f"{where}: table {table!r} holds events of another application (topic {foreign[0][0]!r}); "
                              "Chronicle will not write beside them. Use a new database or schema.")


def _not_ours(where: str, tables: set[str], advice: str) -> str:
    shown = ", ".join(sorted(tables)[:5]) + (" …" if len(tables) > 5 else "")
    return f"{where} holds {len(tables)} table(s) of another application ({shown}) and no Chronicle store; {advice}"
