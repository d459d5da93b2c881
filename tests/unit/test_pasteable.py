"""The `chronicle …` hints messages offer: plain where a plain command opens the store, else with the root `--db`,
quoted for a POSIX shell, and never with a password (runtime/pasteable.py)."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from chronicle.runtime.cli.app import app
from chronicle.runtime.pasteable import SHELL_DB, pasteable, pasteable_in


@pytest.fixture
def here(tmp_path, monkeypatch) -> Path:
    """A project directory with a default store, as the current directory; CHRONICLE_DB unset (tests/conftest.py)."""
    project = tmp_path / "project"
    (project / ".chronicle").mkdir(parents=True)
    (project / ".chronicle" / "chronicle.db").touch()
    monkeypatch.chdir(project)
    return project


def pasted_url(hint: str) -> str:
    """The URL a shell passes to --db when the hint is pasted."""
    words = shlex.split(hint)
    assert words[:2] == ["chronicle", "--db"], hint
    return words[2]


def test_the_default_store_gets_the_plain_command(here, monkeypatch):
    assert pasteable("redo abc", f"sqlite:///{here / '.chronicle' / 'chronicle.db'}") == "chronicle redo abc"
    # Found upward, as git finds .git: from a subdirectory too.
    sub = here / "src" / "deep"
    sub.mkdir(parents=True)
    monkeypatch.chdir(sub)
    assert pasteable("log abc", f"sqlite:///{here / '.chronicle' / 'chronicle.db'}") == "chronicle log abc"


def test_no_store_known_gets_the_plain_command(here):
    assert pasteable("resume abc", None) == "chronicle resume abc"


def test_a_named_sqlite_store_gets_the_root_db_with_its_absolute_url(here, tmp_path):
    other = tmp_path / "elsewhere.db"
    assert pasteable("log abc", f"sqlite:///{other}") == f"chronicle --db sqlite:///{other} log abc"
    # A relative URL (from the current directory) is shown resolved: the paste works from any directory.
    assert pasteable("log abc", "sqlite:///stores/x.db") == f"chronicle --db sqlite:///{here / 'stores' / 'x.db'} log abc"


def test_a_named_store_where_there_is_no_default_gets_the_root_db(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert pasteable("undo abc", f"sqlite:///{tmp_path / 'x.db'}") == f"chronicle --db sqlite:///{tmp_path / 'x.db'} undo abc"
    # The default a first `run` here would create is the store a plain command opens.
    assert pasteable("undo abc", f"sqlite:///{tmp_path / '.chronicle' / 'chronicle.db'}") == "chronicle undo abc"


def test_chronicle_db_naming_the_same_store_needs_no_db(here, tmp_path, monkeypatch):
    other = tmp_path / "elsewhere.db"
    monkeypatch.setenv("CHRONICLE_DB", f"sqlite:///{other}")
    assert pasteable("log abc", f"sqlite:///{other}") == "chronicle log abc"
    monkeypatch.setenv("CHRONICLE_DB", "sqlite:///../elsewhere.db")  # the same file, written relative to here
    assert pasteable("log abc", f"sqlite:///{other}") == "chronicle log abc"
    # CHRONICLE_DB naming another store: the default store itself now needs its --db.
    default = here / ".chronicle" / "chronicle.db"
    assert pasteable("log abc", f"sqlite:///{default}") == f"chronicle --db sqlite:///{default} log abc"


def test_the_root_db_is_not_the_shells_chronicle_db(here, tmp_path, monkeypatch):
    """`chronicle --db URL CMD` puts URL in CHRONICLE_DB for the command; the user's shell does not have it."""
    other = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    monkeypatch.setenv("CHRONICLE_DB", other)
    token = SHELL_DB.set("")
    try:
        assert pasteable("log abc", other) == f"chronicle --db {other} log abc"
    finally:
        SHELL_DB.reset(token)
    token = SHELL_DB.set(other)  # the shell had it too
    try:
        assert pasteable("log abc", other) == "chronicle log abc"
    finally:
        SHELL_DB.reset(token)


def test_a_field_of_an_answer_does_not_read_chronicle_db(here, tmp_path, monkeypatch):
    """`why`'s saw.history is the same from the CLI (whose shell has CHRONICLE_DB) and the library (whose caller's
    environment is not known): only the default lookup from the current directory makes it plain."""
    other = f"sqlite:///{tmp_path / 'elsewhere.db'}"
    default = f"sqlite:///{here / '.chronicle' / 'chronicle.db'}"
    for shell in ("", other):
        monkeypatch.setenv("CHRONICLE_DB", shell)
        token = SHELL_DB.set(shell)
        try:
            assert pasteable("log abc", other, shell=False) == f"chronicle --db {other} log abc"
            assert pasteable("log abc", default, shell=False) == "chronicle log abc"
        finally:
            SHELL_DB.reset(token)
    assert pasteable("log abc", other) == "chronicle log abc"  # a message's hint still reads the shell's


def test_a_password_never_reaches_the_hint(here):
    url = "postgresql://alice:s3cr%40t-pw@db.example:5433/agents?schema=team&sslpassword=k3y-pass&sslmode=require"
    hint = pasteable("log abc", url)
    assert "s3cr" not in hint and "k3y-pass" not in hint and "***" not in hint
    assert pasted_url(hint) == "postgresql://alice@db.example:5433/agents?schema=team&sslmode=require"
    # An unencoded "@" or "/" in the password does not leave part of it behind.
    hint = pasteable("log abc", "postgresql://bob:p@ss/w0rd@host/db")
    assert "p@ss" not in hint and "w0rd" not in hint and pasted_url(hint) == "postgresql://bob@host/db"
    assert pasted_url(pasteable("log abc", "postgresql://carol@host/db")) == "postgresql://carol@host/db"


def test_the_url_is_quoted_for_a_posix_shell(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for name in ("my store.db", "it's.db", "$HOME;rm -rf x.db", "a&b|c.db"):
        url = f"sqlite:///{tmp_path / name}"
        hint = pasteable("redo abc --turns 2", url)
        assert pasted_url(hint) == url and shlex.split(hint)[3:] == ["redo", "abc", "--turns", "2"]
    assert pasteable("log abc", f"sqlite:///{tmp_path / 'plain.db'}") == f"chronicle --db sqlite:///{tmp_path / 'plain.db'} log abc"


def test_commands_quoted_in_a_fixed_message_are_made_pasteable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    url = f"sqlite:///{tmp_path / 'x.db'}"
    text = "run `chronicle doctor --repair` (or `chronicle resume SESSION`); `chronicle` alone is left"
    assert pasteable_in(text, url) == (f"run `chronicle --db {url} doctor --repair` (or `chronicle --db {url} resume SESSION`); "
                                       "`chronicle` alone is left")


def test_the_root_db_is_forgotten_when_its_command_ends(tmp_path, monkeypatch):
    """CliRunner runs many commands in one process: the shell's CHRONICLE_DB, saved by the root --db, does not outlive
    its command; and the missing store's advice names the store asked for."""
    monkeypatch.chdir(tmp_path)
    missing = f"sqlite:///{tmp_path / 'nope.db'}"
    result = CliRunner().invoke(app, ["--db", missing, "sessions"])
    assert result.exit_code == 1
    assert f"run `chronicle --db {missing} run …` to start one there" in result.output
    assert SHELL_DB.get() is None
