"""A store that does not open is a `ChronicleError` in a program, with the words and code of the CLI's
`error:` line: a program catching ChronicleError must not meet eventsourcing's OperationalError, the
pool's timeout or a ValueError from the URL instead."""

from __future__ import annotations

import base64
import os
import socket
from urllib.parse import urlparse, urlunparse

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from tests import store_leaks
from tests.helpers import cli


def _error_line(stderr: str) -> str:
    return next(line for line in stderr.splitlines() if line.startswith("error: ")).removeprefix("error: ")


def _closed_port() -> int:
    with socket.socket() as probe:  # a port nothing listens on once the probe is closed
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _with(url: str, netloc: str | None = None, path: str | None = None) -> str:
    parsed = urlparse(url)
    return urlunparse(parsed._replace(netloc=netloc or parsed.netloc, path=path or parsed.path))


def _library_error(url: str) -> ChronicleError:
    with pytest.raises(ChronicleError) as raised:
        with Chronicle(url) as app:
            app.sessions()
    return raised.value


def test_a_postgresql_server_that_is_down_is_a_chronicle_error_with_the_cli_words(pg_database, monkeypatch):
    monkeypatch.setenv("CHRONICLE_PG_CONNECT_TIMEOUT", "1")
    parsed = urlparse(pg_database)
    closed = _with(pg_database, netloc=f"{parsed.username or 'postgres'}@127.0.0.1:{_closed_port()}")
    error = _library_error(closed)
    assert error.code == 1
    assert store_leaks.open_now() == [], "the pool of the store that did not open is closed, not left to the collector"
    assert str(error).startswith("cannot open the database") and "Connection refused" in str(error)
    assert str(error).endswith("Check --db / CHRONICLE_DB and that the server is running.")
    done = cli("sessions", db=closed, env={"CHRONICLE_PG_CONNECT_TIMEOUT": "1"})
    assert done.returncode == error.code and _error_line(done.stderr) == str(error)


def test_a_postgresql_database_that_does_not_exist_says_how_to_create_it(pg_database):
    missing = _with(pg_database, path="/chronicle_no_such_database")
    error = _library_error(missing)
    assert error.code == 1 and 'database "chronicle_no_such_database" does not exist' in str(error)
    assert store_leaks.open_now() == []
    assert "createdb" in str(error) and "chronicle_no_such_database" in str(error).rpartition("createdb")[2]
    done = cli("sessions", db=missing)
    assert done.returncode == 1 and _error_line(done.stderr) == str(error)


def test_a_store_refused_after_its_pool_opened_closes_the_pool(db_url, workspace, tmp_path, monkeypatch):
    """An encrypted store opened without its key is refused once its first event is read, its pool open by then: a
    program that catches the ChronicleError and carries on must not leave that pool to the collector (which once
    finalised a PostgreSQL one on the pool's own thread, a warning in whichever test ran then)."""
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", base64.b64encode(os.urandom(32)).decode())
    (tmp_path / "unused.json").write_text('{"agents": {"main": []}}', encoding="utf-8")
    with Chronicle(db_url) as app:
        app.submit(Agent(tools=[], provider=f"scripted:{tmp_path / 'unused.json'}"), "hi", workspace=workspace)
    monkeypatch.delenv("CHRONICLE_CIPHER_KEY")
    error = _library_error(db_url)
    assert error.code == 2 and "is encrypted: set CHRONICLE_CIPHER_KEY" in str(error)
    assert store_leaks.open_now() == []


def test_a_file_that_is_not_a_store_is_a_chronicle_error_with_the_cli_words(tmp_path):
    not_a_store = tmp_path / "notes.db"
    not_a_store.write_text("these are notes, not a database\n" * 200)  # a --db pointed at the wrong file
    url = f"sqlite:///{not_a_store}"
    error = _library_error(url)
    assert error.code == 2 and "is not an SQLite database Chronicle can use" in str(error)
    done = cli("sessions", "--json", db=url)
    assert done.returncode == error.code and _error_line(done.stderr) == str(error)
    assert not_a_store.read_text().startswith("these are notes")  # and nothing was written to it


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "mysql://root@localhost/db", "postgresql://postgres@127.0.0.1:5432",
                                 # malformed: an internal error (ValueError, exit 1) before
                                 "postgresql://postgres@127.0.0.1:notaport/x", "postgresql://postgres@127.0.0.1:99999/x",
                                 "postgresql://postgres@[::1/x"])
def test_a_url_that_cannot_work_is_refused_as_the_cli_refuses_it(url):
    error = _library_error(url)
    assert error.code == 2
    done = cli("sessions", db=url)
    assert done.returncode == 2 and _error_line(done.stderr) == str(error)


def test_reading_a_sqlite_store_that_does_not_exist_is_a_chronicle_error_and_running_an_agent_still_creates_it(
        tmp_path, workspace, monkeypatch):
    """`Chronicle(url).sessions()` on a missing file used to create an empty store there, where `chronicle sessions`
    exits 1: a read, or an act on what a store holds, now raises with the facts the CLI's line gives (the advice is
    the library's own) and leaves nothing behind; running an agent creates the store as before."""
    missing = tmp_path / "not-yet" / "agent.db"
    url = f"sqlite:///{missing}"
    readers = {
        "sessions": lambda app: app.sessions(), "cost": lambda app: app.cost(), "audit": lambda app: app.audit(),
        "jobs": lambda app: app.jobs(), "log": lambda app: app.log("abc"), "fork": lambda app: app.fork("abc"),
        "undo": lambda app: app.undo("abc"), "approve": lambda app: app.approve("abc"), "verify": lambda app: app.verify(),
        # continuing a session looks for it in a store that exists, as `run --session` does
        "run --session": lambda app: app.run_sync(Agent(tools=[], provider="scripted:/nowhere.json"), "hi", session="abc"),
        "submit --session": lambda app: app.submit(Agent(tools=[], provider="scripted:/nowhere.json"), "hi", session="abc"),
    }
    done = cli("sessions", db=url)
    assert done.returncode == 1
    facts = _error_line(done.stderr).partition(";")[0]
    assert facts == f"no Chronicle store at {missing}"
    for name, read in readers.items():
        with Chronicle(url) as app, pytest.raises(ChronicleError) as raised:
            read(app)
        assert raised.value.code == done.returncode, name
        assert str(raised.value).startswith(facts + "; running an agent there"), (name, str(raised.value))
    assert not missing.parent.exists(), "nothing created, not even the directory"

    monkeypatch.chdir(workspace)  # no store here or above, no CHRONICLE_DB: the default one is looked for upward
    with Chronicle() as app, pytest.raises(ChronicleError) as here:
        app.sessions()
    assert str(here.value).startswith(f"no Chronicle store here (no .chronicle/chronicle.db in {workspace} or above)")
    assert not (workspace / ".chronicle").exists()

    script = tmp_path / "s.json"
    script.write_text('{"agents": {"main": [{"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}]}}',
                      encoding="utf-8")
    with Chronicle(url) as app:
        with pytest.raises(ChronicleError):
            app.sessions()  # refused first; the same Chronicle then runs an agent, which starts the store
        result = app.run_sync(Agent(tools=[], provider=f"scripted:{script}"), "hello", workspace=workspace)
        assert [row["session_id"] for row in app.sessions()] == [result.session_id]
    assert missing.is_file()


def test_a_first_run_refused_before_it_records_anything_leaves_no_new_store_behind(tmp_path, workspace, monkeypatch):
    """A run refused for what it was given (a script that is not there, no API key, a workspace that is not a directory,
    an attachment it cannot send, an empty prompt) created the SQLite store first and left it there empty, where
    `chronicle run` with the same mistake leaves nothing. Checked before the store is made, it is not made; `submit`
    and `submit_job` of a new session alike."""
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    missing = tmp_path / "not-yet" / "agent.db"
    url = f"sqlite:///{missing}"
    script = tmp_path / "s.json"
    script.write_text('{"agents": {"main": [{"content": [{"type": "text", "text": "hi"}], "stop_reason": "end_turn"}]}}',
                      encoding="utf-8")
    agent = Agent(tools=[], provider=f"scripted:{script}")
    refused = {
        "a script not there": lambda app: app.run_sync(Agent(tools=[], provider=f"scripted:{tmp_path / 'none.json'}"), "hi",
                                                       workspace=workspace),
        "no API key": lambda app: app.run_sync(Agent(tools=[], provider="anthropic"), "hi", workspace=workspace),
        "no provider": lambda app: app.run_sync(Agent(tools=[]), "hi", workspace=workspace),
        "no workspace": lambda app: app.run_sync(agent, "hi", workspace=tmp_path / "no-such-dir"),
        "a bad attachment": lambda app: app.run_sync(agent, "hi", workspace=workspace, attachments=[(b"abc", "image/png")]),
        "an empty prompt": lambda app: app.run_sync(agent, "  ", workspace=workspace),
        # submitting for a worker checks the same before its store is made
        "submit: a script not there": lambda app: app.submit(Agent(tools=[], provider=f"scripted:{tmp_path / 'none.json'}"),
                                                             "hi", workspace=workspace),
        "submit: no workspace": lambda app: app.submit(agent, "hi", workspace=tmp_path / "no-such-dir"),
        "submit: a bad attachment": lambda app: app.submit(agent, "hi", workspace=workspace,
                                                           attachments=[(b"abc", "image/png")]),
        "submit: an empty prompt": lambda app: app.submit(agent, " ", workspace=workspace),
        "submit_job: no API key": lambda app: app.submit_job(Agent(tools=[], provider="anthropic"), "hi", workspace=workspace),
        "submit_job: no workspace": lambda app: app.submit_job(agent, "hi", workspace=tmp_path / "no-such-dir"),
        "submit_job: an empty prompt": lambda app: app.submit_job(agent, "", workspace=workspace),
    }
    for name, run in refused.items():
        with Chronicle(url) as app, pytest.raises(ChronicleError) as raised:
            run(app)
        assert raised.value.code == 2, (name, str(raised.value))
        assert not missing.parent.exists(), f"{name}: a store was left behind"
    with Chronicle(url) as app:
        assert app.submit(agent, "hello", workspace=workspace)["session_id"]
    assert missing.is_file()
    missing.unlink()
    with Chronicle(url) as app:
        assert app.run_sync(agent, "hello", workspace=workspace).status == "completed"
    assert missing.is_file()


def test_a_database_lost_under_an_open_chronicle_is_told_at_once_and_its_return_is_used(pg_database, workspace, tmp_path):
    """A program keeps its Chronicle open, as a web app does: its database taken away (dropped, renamed, its logins
    refused) is a ChronicleError (code 1, "the store is unavailable: …", the CLI's words) naming the server's reason
    within a second, not ten pool timeouts (52 s) of retries ending in the pool's "couldn't get a connection" (a raw
    eventsourcing error); once the database is back, the same Chronicle uses it."""
    import time

    from tests.conftest import bring_database_back, own_database, take_database_away

    (tmp_path / "s.json").write_text('{"agents": {"main": [{"content": [{"type": "text", "text": "hi"}]}]}}')
    with own_database(pg_database, "chronicle_lib") as (name, url), Chronicle(url) as app:
        sid = app.submit(Agent(tools=[], provider=f"scripted:{tmp_path / 's.json'}"), "hello", workspace=workspace)
        take_database_away(name)
        started = time.monotonic()
        with pytest.raises(ChronicleError) as lost:
            app.sessions()
        assert time.monotonic() - started < 3
        assert lost.value.code == 1 and str(lost.value).startswith("the store is unavailable: the database refuses")
        assert f'database "{name}" does not exist' in str(lost.value) and "couldn't get" not in str(lost.value)
        bring_database_back(name)
        time.sleep(1.1)  # a refusal is believed for a second (pg_datastore.VERDICT_S), then asked again
        assert [row["session_id"] for row in app.sessions()] == [sid["session_id"]]


def test_a_database_dropped_and_created_again_under_an_open_chronicle_is_refused_until_a_restart(pg_database, workspace,
                                                                                                  tmp_path):
    """A restore by drop and create while a program runs: the program holds sessions read from the old database, and
    their next events would land on the new log at versions that do not follow what is there. Every call is refused
    with the reason (ChronicleError 1, `the store is unavailable: …`) until a new Chronicle reads the store as it is."""
    import psycopg

    from tests.conftest import ADMIN_DSN, own_database, take_database_away

    (tmp_path / "s.json").write_text('{"agents": {"main": [{"content": [{"type": "text", "text": "hi"}]}]}}')
    agent = Agent(tools=[], provider=f"scripted:{tmp_path / 's.json'}")
    with own_database(pg_database, "chronicle_restored") as (name, url):
        with Chronicle(url) as app:
            app.submit(agent, "hello", workspace=workspace)
            take_database_away(name)
            with psycopg.connect(ADMIN_DSN, autocommit=True) as admin:
                admin.execute(f'CREATE DATABASE "{name}"')
            with Chronicle(url) as backup:  # restored from a backup that holds another session
                restored = backup.submit(agent, "from the backup", workspace=workspace)["session_id"]
            for _ in range(2):  # the verdict is kept: no second look lets the program write on
                with pytest.raises(ChronicleError) as refused:
                    app.submit(agent, "and then", workspace=workspace)
                assert refused.value.code == 1 and "was dropped and created again" in str(refused.value)
                assert str(refused.value).startswith("the store is unavailable: ")
        with Chronicle(url) as restarted:  # a restart reads the store as it is now, and nothing was written onto it
            assert [row["session_id"] for row in restarted.sessions()] == [restored]
