"""A PostgreSQL server at a connection limit (SQLSTATE 53300: the role's or database's CONNECTION LIMIT, max_connections,
the slots kept for superusers) is said at once, in the server's words, with what to do: `serve` held each request 52 s,
then answered "couldn't get a connection after 5.00 sec", and the CLI took 6 s to call the server "not answering"."""

from __future__ import annotations

import json
import time
import uuid
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from chronicle import Agent, Chronicle, ChronicleError
from chronicle.runtime.pg_datastore import refusal
from tests.conftest import ADMIN_DSN
from tests.helpers import cli, response, text


@pytest.mark.parametrize("said", [
    'FATAL:  too many connections for role "r"',
    'FATAL:  too many connections for database "d"',
    "FATAL:  sorry, too many clients already",
    "FATAL:  remaining connection slots are reserved for roles with the SUPERUSER attribute",
    "FATAL:  remaining connection slots are reserved for non-replication superuser connections",
])
def test_every_connection_limit_is_read_as_one(said):
    assert refusal(f'connection to server at "127.0.0.1", port 5432 failed: {said}') == "full"


def test_a_role_at_its_connection_limit_is_said_at_once_by_the_cli_and_an_open_chronicle(pg_database, workspace, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [response(text("hi"))]}}), encoding="utf-8")
    role = name = f"chronicle_limited_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN CONNECTION LIMIT 5')
        admin.execute(f'CREATE DATABASE "{name}" OWNER "{role}"')
    try:
        url = pg_database.rsplit("/", 1)[0] + f"/{name}"
        parts = urlsplit(url)
        url = urlunsplit(parts._replace(netloc=f"{role}@{parts.hostname}:{parts.port}"))
        with Chronicle(url) as app:
            sid = app.run_sync(Agent(tools=[], provider=f"scripted:{script}"), "hello", workspace=workspace).session_id
            with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
                admin.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT 0')
                admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s", (role,))
            try:
                started = time.monotonic()
                shown = cli("sessions", db=url)
                took = time.monotonic() - started
                assert shown.returncode == 1
                assert f'too many connections for role "{role}"' in shown.stderr, shown.stderr
                assert "CONNECTION LIMIT" in shown.stderr and "max_connections" in shown.stderr
                assert "not answering" not in shown.stderr and "couldn't get a connection" not in shown.stderr
                assert took < 4, took  # the client's whole connect timeout (5 s) was waited before
                started = time.monotonic()
                with pytest.raises(ChronicleError) as refused:
                    app.sessions()
                assert time.monotonic() - started < 3  # `serve` waited 52 s
                assert refused.value.code == 1 and str(refused.value).startswith("the store is unavailable")
                assert f'too many connections for role "{role}"' in str(refused.value)
            finally:
                with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
                    admin.execute(f'ALTER ROLE "{role}" CONNECTION LIMIT 5')
            time.sleep(1.1)  # a refusal is believed for a second (pg_datastore.VERDICT_S), then asked again
            assert [row["session_id"] for row in app.sessions()] == [sid]
    finally:
        with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:  # the role goes with its database
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')
