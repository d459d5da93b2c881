"""PostgreSQL saves call a stored function; a store that lost it (restored from a dump of its
tables alone, or cleaned by hand) must keep saving and say so, and `doctor` must find it."""

from __future__ import annotations

import logging

import psycopg
import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.chain_postgres import SAVE_FUNCTION
from chronicle.runtime.doctor import examine
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.verify import Verifier
from tests.conftest import fresh_pg_url


def _drop_function(url: str) -> None:
    with psycopg.connect(url.split("?")[0], autocommit=True) as conn:
        schema = url.split("schema=")[1] if "schema=" in url else "public"
        conn.execute(f'DROP FUNCTION "{schema}".{SAVE_FUNCTION}')


@pytest.fixture
def pg_url(pg_database) -> str:
    return fresh_pg_url(pg_database)


def test_a_save_that_finds_the_function_missing_creates_it_and_commits_chained(pg_url, caplog):
    store = ChronicleStore(pg_url)
    start_session(store, AgentSpec(), "before")
    store.close()
    _drop_function(pg_url)

    store = ChronicleStore(pg_url)  # the store's marks say its DDL ran: nothing creates the function at open
    with caplog.at_level(logging.WARNING, logger="chronicle.runtime.chain_postgres"):
        session, _ = start_session(store, AgentSpec(), "after")
    assert any("was missing; created it again" in r.getMessage() for r in caplog.records)
    assert ChronicleStore(pg_url).session(session.id).version == session.version  # committed, read by another store
    assert store.recorder.save_function_exists()  # type: ignore[attr-defined]
    verdict = Verifier(store).verify_all()
    assert verdict.ok and verdict.chained == verdict.events
    store.close()


def test_doctor_reports_the_missing_function_and_repair_creates_it(pg_url):
    store = ChronicleStore(pg_url)
    start_session(store, AgentSpec(), "one")
    assert [f.check for f in examine(store)] == []
    _drop_function(pg_url)

    found = examine(store)
    assert [(f.check, f.repaired) for f in found] == [("missing_save_function", False)]
    assert not store.recorder.save_function_exists()  # type: ignore[attr-defined]  # looking repairs nothing
    repaired = examine(store, repair=True)
    assert [(f.check, f.repaired) for f in repaired] == [("missing_save_function", True)]
    assert examine(store) == []
    store.close()
