"""Commands that only read, or act on what a store holds, never create a store on PostgreSQL either, as they never
create a SQLite file (README, "Where the store is"). On a database or schema with no store, `sessions` created 29
tables and said "no sessions yet", `verify` created 4 and passed on "0 events", and a `?schema=` mistyped was
created silently: a typo read as an empty store. Now they say where they looked, exit 1, and create nothing."""

from __future__ import annotations

import uuid

import pytest

from chronicle import Chronicle, ChronicleError
from tests.conftest import fresh_pg_url
from tests.helpers import cli


def _schemas_and_tables(base: str, schema: str) -> tuple[bool, int]:
    import psycopg

    with psycopg.connect(base, autocommit=True) as conn:
        exists = conn.execute("SELECT count(*) FROM pg_namespace WHERE nspname = %s", (schema,)).fetchone()[0] == 1
        tables = conn.execute("SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                              "WHERE n.nspname = %s", (schema,)).fetchone()[0]
    return exists, tables


@pytest.fixture(params=["no such schema", "an empty schema"])
def nowhere(request, pg_database):
    """(URL with a password, base URL, schema): a schema that does not exist, or one that exists with nothing in it."""
    if request.param == "an empty schema":
        url = fresh_pg_url(pg_database)
        schema = url.rsplit("=", 1)[1]
    else:
        schema = f"nosuch_{uuid.uuid4().hex[:10]}"
        url = f"{pg_database}?schema={schema}"
    # trust auth ignores the password: it is there to be kept out of every message
    return url.replace("postgres@", "postgres:hunter2secret@", 1), pg_database, schema


@pytest.mark.parametrize("command", [("sessions",), ("sessions", "--json"), ("verify",), ("log", "abc"), ("doctor",),
                                     ("cost",), ("projections", "status")])
def test_a_reader_on_a_schema_without_a_store_says_so_and_creates_nothing(nowhere, command):
    url, base, schema = nowhere
    before = _schemas_and_tables(base, schema)
    done = cli(*command, db=url)
    assert done.returncode == 1 and done.stdout == "", done.stdout
    database = base.rsplit("/", 1)[1]
    assert done.stderr.startswith(f"error: no Chronicle store in database {database!r}, schema {schema!r} on 127.0.0.1:5432; ")
    assert "check --db" in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "hunter2secret" not in done.stderr
    assert _schemas_and_tables(base, schema) == before


def test_resume_all_has_nothing_to_resume_there(nowhere):
    url, base, schema = nowhere
    before = _schemas_and_tables(base, schema)
    done = cli("resume", "--all", db=url)
    assert done.returncode == 0 and done.stdout.startswith("nothing to resume: no Chronicle store in database ")
    assert _schemas_and_tables(base, schema) == before


def test_the_library_reads_refuse_in_the_same_words_and_running_creates_the_store(nowhere, tmp_path):
    url, base, schema = nowhere
    before = _schemas_and_tables(base, schema)
    with Chronicle(url) as app:
        for read in (app.sessions, app.verify, app.cost):
            with pytest.raises(ChronicleError) as raised:
                read()
            assert raised.value.code == 1 and str(raised.value).startswith("no Chronicle store in database ")
            assert "Chronicle.run" in str(raised.value) and "hunter2secret" not in str(raised.value)
        assert _schemas_and_tables(base, schema) == before
        app.store  # what running an agent opens: it creates the store, as documented  # noqa: B018
    assert _schemas_and_tables(base, schema)[1] > 0
    with Chronicle(url) as app:
        assert app.sessions() == []
    assert cli("verify", db=url).returncode == 0
