"""PostgreSQL: a store's tables are set up once (runtime/schema_marks.py), not by every open,
and a table that went missing is made again. DDL is observed with an event trigger on the server."""

from __future__ import annotations

import uuid

import psycopg
import pytest

from chronicle.runtime.store import ChronicleStore
from tests.conftest import fresh_pg_url


@pytest.fixture
def ddl_seen(pg_database):
    """Every DDL command the server starts while the test runs (this worker's database; it runs one test at a time)."""
    log = f"ddl_seen_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(pg_database, autocommit=True) as admin:
        admin.execute(f"CREATE TABLE public.{log} (tag text NOT NULL)")
        admin.execute(f"CREATE FUNCTION public.{log}_note() RETURNS event_trigger LANGUAGE plpgsql AS "
                      f"$$ BEGIN INSERT INTO public.{log} VALUES (tg_tag); END $$")
        admin.execute(f"CREATE EVENT TRIGGER {log} ON ddl_command_start EXECUTE FUNCTION public.{log}_note()")

        def seen() -> list[str]:
            tags = [tag for (tag,) in admin.execute(f"SELECT tag FROM public.{log}").fetchall()]
            admin.execute(f"DELETE FROM public.{log}")
            return tags

        try:
            yield seen
        finally:
            admin.execute(f"DROP EVENT TRIGGER {log}")
            admin.execute(f"DROP FUNCTION public.{log}_note()")
            admin.execute(f"DROP TABLE public.{log}")


@pytest.mark.postgres
def test_a_store_set_up_once_opens_without_ddl(pg_database, ddl_seen):
    url = fresh_pg_url(pg_database)
    ChronicleStore(url).close()
    assert "CREATE TABLE" in ddl_seen()  # the first open sets the tables up

    store = ChronicleStore(url)
    assert store.session_ids() == []  # opened and usable
    store.close()
    assert ddl_seen() == []


@pytest.mark.postgres
def test_a_table_that_went_missing_is_made_again(pg_database, ddl_seen):
    url = fresh_pg_url(pg_database)
    schema = url.split("?schema=")[1]
    ChronicleStore(url).close()
    with psycopg.connect(pg_database, autocommit=True) as admin:
        admin.execute(f'DROP TABLE "{schema}".chronicle_chain')
    ddl_seen()

    store = ChronicleStore(url)
    assert "CREATE TABLE" in ddl_seen()
    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.runtime.sessions import start_session

    start_session(store, AgentSpec(), "hello")  # a save writes its chain links again
    with psycopg.connect(pg_database, autocommit=True) as admin:
        (links,) = admin.execute(f'SELECT count(*) FROM "{schema}".chronicle_chain').fetchone()
    assert links > 0
    store.close()
