"""A value of --db / CHRONICLE_DB that is not a database URL is refused naming what to write instead, and never echoes
a password the redaction cannot find (a DSN without a scheme keeps it where no URL does)."""

from __future__ import annotations

import os

import pytest

from chronicle.runtime.config import ConfigError, eventsourcing_env


@pytest.mark.parametrize(("given", "meant"), [
    ("./x.db", "sqlite:///x.db"), ("data/z.db", "sqlite:///data/z.db"), ("/tmp/y.db", "sqlite:////tmp/y.db"),
    ("~/agent.db", f"sqlite:///{os.path.expanduser('~/agent.db')}"),
])
def test_a_file_path_is_answered_with_the_url_that_names_that_file(given, meant):
    with pytest.raises(ConfigError) as refused:
        eventsourcing_env(given)
    assert f"is a path, not a database URL: for that SQLite file use {meant} " in str(refused.value)


@pytest.mark.parametrize("given", ["user:hunter2secret@db.example/app", "host=db password=hunter2secret dbname=app"])
def test_a_dsn_without_a_scheme_is_refused_without_its_password(given):
    with pytest.raises(ConfigError) as refused:
        eventsourcing_env(given)
    assert "hunter2secret" not in str(refused.value) and "not shown: it may hold a password" in str(refused.value)


def test_another_scheme_is_named_with_its_password_masked():
    with pytest.raises(ConfigError) as refused:
        eventsourcing_env("mysql://app:hunter2secret@db/app")
    assert "hunter2secret" not in str(refused.value) and "'mysql://app:***@db/app'" in str(refused.value)


@pytest.mark.parametrize(("given", "why"), [
    ("postgresql://postgres@127.0.0.1:notaport/x", "Port could not be cast to integer value as 'notaport'"),
    ("postgresql://postgres@127.0.0.1:99999/x", "Port out of range 0-65535"),
    ("postgresql://postgres@[::1/x", "Invalid IPv6 URL"),
])
def test_a_malformed_url_is_a_usage_error_not_a_value_error(given, why):
    """They ended in `internal error: ValueError: …` (exit 1): urllib's words, said as the URL's fault."""
    with pytest.raises(ConfigError) as refused:
        eventsourcing_env(given)
    assert str(refused.value).startswith(f"malformed database URL {given!r}: {why}; use ")


def test_a_malformed_url_keeps_its_password_masked():
    with pytest.raises(ConfigError) as refused:
        eventsourcing_env("postgresql://app:hunter2secret@db:notaport/app")
    assert "hunter2secret" not in str(refused.value) and "app:***@db" in str(refused.value)


def test_port_zero_is_refused_rather_than_read_as_the_default_port():
    with pytest.raises(ConfigError) as refused:
        eventsourcing_env("postgresql://postgres@127.0.0.1:0/x")
    assert "port 0" in str(refused.value)


def test_an_empty_store_url_is_refused_not_taken_for_the_default_store(tmp_path):
    """`--db "$DB"` with DB unset wrote to whatever `.chronicle/` the directory had; an empty CHRONICLE_DB is unset."""
    from chronicle import Chronicle, ChronicleError
    from tests.helpers import cli

    for args in (("sessions", "--db", ""), ("--db", " ", "sessions"), ("run", "hi", "--db", "")):
        refused = cli(*args, cwd=tmp_path)
        assert refused.returncode == 2 and "the store URL is empty" in refused.stderr, (args, refused.stderr)
    assert not (tmp_path / ".chronicle").exists()
    with pytest.raises(ChronicleError, match="the store URL is empty") as error:
        Chronicle("")
    assert error.value.code == 2
    unset = cli("sessions", cwd=tmp_path, env={"CHRONICLE_DB": ""})
    assert "the store URL is empty" not in unset.stderr, unset.stderr


@pytest.mark.parametrize(("given", "meant"), [("plain.db", "sqlite:///plain.db"), ("./x.db", "sqlite:///x.db"),
                                              ("~/x.db", f"sqlite:///{os.path.expanduser('~/x.db')}")])
def test_chronicle_refuses_a_path_when_it_is_made_not_at_its_first_call(given, meant, tmp_path, monkeypatch):
    """`Chronicle("plain.db")` was taken, then its first call raised the same words through a traceback of its own."""
    from chronicle import Chronicle, ChronicleError

    monkeypatch.chdir(tmp_path)
    with pytest.raises(ChronicleError) as refused:
        Chronicle(given)
    assert refused.value.code == 2 and f"{given!r} is a path, not a database URL: for that SQLite file use {meant} " in str(refused.value)
    monkeypatch.setenv("CHRONICLE_DB", given)  # from the environment: said so
    with pytest.raises(ChronicleError) as refused:
        Chronicle()
    assert refused.value.code == 2 and str(refused.value).startswith(f"CHRONICLE_DB: {given!r} is a path"), refused.value
    assert list(tmp_path.iterdir()) == []  # no store made anywhere


def test_chronicle_db_and_the_default_still_name_a_store(tmp_path, monkeypatch):
    from chronicle import Chronicle
    from tests.helpers import cli

    monkeypatch.chdir(tmp_path)
    assert Chronicle().url == f"sqlite:///{tmp_path / '.chronicle' / 'chronicle.db'}"
    monkeypatch.setenv("CHRONICLE_DB", "sqlite:///named.db")
    assert Chronicle().url == f"sqlite:///{tmp_path / 'named.db'}"
    assert Chronicle("sqlite:///other.db").url == f"sqlite:///{tmp_path / 'other.db'}"
    refused = cli("sessions", cwd=tmp_path, env={"CHRONICLE_DB": "plain.db"})
    assert refused.returncode == 2 and "'plain.db' is a path, not a database URL" in refused.stderr, refused.stderr
    assert list(tmp_path.iterdir()) == []
