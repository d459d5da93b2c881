"""A PostgreSQL database that takes no logins (`ALLOW_CONNECTIONS false` for maintenance, or no CONNECT privilege) is
said as the server says it, at once: it was waited out as a server "not answering" and then said as the pool's
"couldn't get a connection", which names neither the cause nor the remedy."""

from __future__ import annotations

import json
import time

import psycopg

from chronicle import Agent, Chronicle, ChronicleError
from tests.conftest import ADMIN_DSN, own_database
from tests.helpers import cli, response, text


def _allow(name: str, allowed: bool, end_sessions: bool = False) -> None:
    with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS {"true" if allowed else "false"}')
        if end_sessions:
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (name,))


def test_a_closed_database_is_named_with_the_servers_reason_by_the_cli_and_an_open_chronicle(pg_database, workspace, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [response(text("hi"))]}}), encoding="utf-8")
    with own_database(pg_database, "chronicle_closed") as (name, url):
        with Chronicle(url) as app:
            sid = app.run_sync(Agent(tools=[], provider=f"scripted:{script}"), "hello", workspace=workspace).session_id
            _allow(name, False, end_sessions=True)
            try:
                shown = cli("sessions", db=url)
                assert shown.returncode == 1
                assert f'database "{name}" is not currently accepting connections' in shown.stderr
                assert "ALLOW_CONNECTIONS" in shown.stderr and "couldn't get a connection" not in shown.stderr
                assert "not answering" not in shown.stderr, shown.stderr
                try:
                    app.sessions()
                    raise AssertionError("a closed database was read")
                except ChronicleError as exc:
                    assert exc.code == 1 and str(exc).startswith("the store is unavailable")
                    assert "is not currently accepting connections" in str(exc)
            finally:
                _allow(name, True)
            time.sleep(1.1)  # a refusal is believed for a second (pg_datastore.VERDICT_S), then asked again
            assert [row["session_id"] for row in app.sessions()] == [sid]
