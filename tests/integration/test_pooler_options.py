"""PostgreSQL behind a pooler that does not pass libpq's `options` startup parameter, as PgBouncer
does not: by default it refuses such a login, and with `ignore_startup_parameters = options` it
drops them. The store's read models name no schema and relied on the search path the options
set, so through a dropping pooler they read and wrote the default search path's tables (here a
second store's), and through a refusing one no command could connect at all. Both poolers are
emulated on the wire (tests/pooler_proxy.py)."""

from __future__ import annotations

import logging
import uuid
from contextlib import closing
from urllib.parse import urlparse, urlunparse

import pytest

from chronicle import Agent, Chronicle
from chronicle.runtime.past_context import history_engine
from chronicle.runtime.store import ChronicleStore
from tests.conftest import ADMIN_DSN, drop_database_later
from tests.helpers import cli, json_lines, response, text, write_script
from tests.pooler_proxy import OptionsPooler


@pytest.fixture
def database(pg_database):
    """A database of the test's own whose `public` schema holds another Chronicle store, with one
    session: what a lost search path would find."""
    import psycopg

    name = f"chronicle_pooler_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    url = urlunparse(urlparse(ADMIN_DSN)._replace(path=f"/{name}"))
    try:
        yield url
    finally:
        drop_database_later(name)


def _session(url: str, tmp_path, prompt: str) -> str:
    script = write_script(tmp_path / f"{uuid.uuid4().hex}.json", [response(text(f"answer to {prompt}"))])
    app = Chronicle(url)
    try:
        result = app.run_sync(Agent(name="main", provider=f"scripted:{script}"), prompt, workspace=str(tmp_path))
        assert result.status == "completed"
        return str(result.session_id)
    finally:
        app.close()


def _public_store(database: str, tmp_path) -> str:
    return _session(database, tmp_path, "in the public schema")


@pytest.mark.parametrize("mode", ["ignore", "refuse"])
def test_a_store_in_its_own_schema_reads_and_writes_only_there_behind_a_pooler(database, tmp_path, mode, caplog):
    public_session = _public_store(database, tmp_path)
    host = urlparse(database)
    pooler = OptionsPooler(mode, (host.hostname or "127.0.0.1", host.port or 5432))
    try:
        url = pooler.url(database) + "?schema=own"
        with caplog.at_level(logging.WARNING):
            own = _session(url, tmp_path, "in its own schema")
        assert pooler.logins_with_options > 0  # the pooler was asked, and did what PgBouncer does
        if mode == "refuse":
            assert any("ignore_startup_parameters" in r.getMessage() for r in caplog.records)
        app = Chronicle(url)
        try:
            assert [s["session_id"] for s in app.sessions()] == [own]
            shown = app.history(own, at=1)
            assert shown[-1]["content"][0]["text"] == "answer to in its own schema"
        finally:
            app.close()
        # Set after the login, the plan mode comes with the search path (projections/sql.py).
        with closing(ChronicleStore(url)) as store, history_engine(store).db.statement() as tx:
            assert tx.value("SELECT current_schema()") == "own"
            assert tx.value("SELECT current_setting('plan_cache_mode')") == "force_generic_plan"
        # The public store's read models never saw the other store's session.
        listed = Chronicle(database)
        try:
            assert [s["session_id"] for s in listed.sessions()] == [public_session]
        finally:
            listed.close()
        # The CLI's `sessions` answers from the read models over a connection of its own.
        result = cli("sessions", "--json", db=url)
        assert result.returncode == 0, result.stderr
        assert [row["session_id"] for row in json_lines(result.stdout)] == [own]
    finally:
        pooler.close()
