"""A PostgreSQL URL's libpq options (`?sslmode=` and the others pg_options.py accepts) reach every connection
Chronicle makes: the store's pool, the bare connection `sessions` reads the read models on, and the LISTEN
connection of a running turn. They used to be dropped: `sessions --db '…?sslmode=require'` listed sessions
over plaintext from a server without TLS, where psql with the same URL fails. The test server has no TLS, so
`require` must fail, at once and on one line, and `disable` / `prefer` must work."""

from __future__ import annotations

import time
import uuid

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from chronicle.runtime.app.session_listing import _connect, current_listing
from chronicle.runtime.control_probes import Listener
from chronicle.runtime.store import open_store_at
from tests.conftest import fresh_pg_url
from tests.helpers import cli, json_lines, response, text, write_script


@pytest.fixture
def store_url(pg_database, tmp_path):
    """A store in a fresh schema with one session, its read models current (what `sessions` reads bare)."""
    url = fresh_pg_url(pg_database)
    script = write_script(tmp_path / "s.json", [response(text("hello"))])
    with Chronicle(url) as app:
        assert app.run_sync(Agent(name="main", provider=f"scripted:{script}"), "hi", workspace=str(tmp_path)).status == "completed"
    assert cli("sessions", db=url).returncode == 0  # catches the read models up
    assert current_listing(url) is not None
    return url


def _error_line(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if line.startswith("error: ")).removeprefix("error: ")


@pytest.mark.parametrize("command", [("sessions", "--json"), ("verify",)])
def test_sslmode_require_on_a_server_without_tls_fails_at_once_on_one_line(store_url, command):
    url = f"{store_url}&sslmode=require"
    started = time.monotonic()
    # A long connect timeout: a refusal said as a server "not answering" would wait it out.
    done = cli(*command, db=url, env={"CHRONICLE_PG_CONNECT_TIMEOUT": "30"})
    assert time.monotonic() - started < 20
    assert done.returncode == 1 and done.stdout == "", done.stderr
    line = _error_line(done.stderr)
    assert "server does not support SSL, but SSL was required" in line and "TLS options" in line
    assert "not answering" not in done.stderr and "internal error" not in done.stderr
    with pytest.raises(ChronicleError) as raised:
        with Chronicle(url) as app:
            app.sessions()
    assert raised.value.code == 1 and str(raised.value) == line


@pytest.mark.parametrize("mode", ["disable", "prefer", "allow"])
def test_sslmode_that_allows_plaintext_reads_the_store(store_url, mode):
    done = cli("sessions", "--json", db=f"{store_url}&sslmode={mode}")
    assert done.returncode == 0 and len(json_lines(done.stdout)) == 1, done.stderr


@pytest.mark.parametrize("query", ["sslmode=bogus", "foo=bar"])
def test_an_option_that_cannot_work_is_refused_before_any_connection(store_url, query):
    done = cli("sessions", db=f"{store_url}&{query}")
    assert done.returncode == 2 and "internal error" not in done.stderr
    assert "sslmode=" in _error_line(done.stderr) or "does not apply: foo" in _error_line(done.stderr)


def _application_name(conn) -> str:
    row = conn.execute("SHOW application_name").fetchone()
    return row[0] if not isinstance(row, dict) else row["application_name"]


def test_every_connection_logs_in_with_the_urls_options(store_url):
    """Seen by the server: the pool's connections, the bare listing connection and the LISTEN one all carry the
    URL's `application_name` (a harmless option, as `sslmode` is carried beside it)."""
    name = f"chronicle_opts_{uuid.uuid4().hex[:8]}"
    url = f"{store_url}&application_name={name}&sslmode=prefer"
    with _connect(url) as (conn, *_):
        assert _application_name(conn.raw) == name
    store = open_store_at(url)
    try:
        with store.recorder.datastore.get_connection() as conn:
            assert _application_name(conn) == name
        listener = Listener(store)
        try:
            assert _application_name(listener.conn) == name
        finally:
            listener.conn.close()
    finally:
        store.close()
