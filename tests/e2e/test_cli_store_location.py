"""Where the store is: found upward like git's `.git`, never created by a command that only reads,
relative SQLite URLs resolved from the current directory, and `--db` accepted before the command."""

from __future__ import annotations

import pytest

from tests.helpers import cli, json_lines, response, text, write_script

READERS = (("sessions",), ("audit",), ("cost",), ("log", "abc"), ("history", "abc"), ("verify",))
#: Commands that act on what a store holds (a session, a job, the read models): without a store there
#: is nothing to act on, and they used to leave an empty `.chronicle/` behind before saying so.
ACTORS = (("undo", "abc"), ("redo", "abc"), ("fork", "abc", "--at", "1"), ("steer", "abc", "hi"), ("cancel", "abc"),
          ("compact", "abc"), ("approve", "abc"), ("deny", "abc"), ("resume", "abc"), ("projections", "status"),
          ("projections", "rebuild"), ("repairs",), ("jobs", "cancel", "abc"), ("routines", "history"))


def _run(tmp_path, cwd, *db_args):
    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    result = cli(*db_args, "run", "hello", "--provider", f"scripted:{script}", "--json", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return json_lines(result.stdout)[0]["session_id"]


@pytest.mark.parametrize("command", READERS + ACTORS, ids=lambda c: "-".join(c[:2]))
def test_a_command_that_reads_or_acts_where_there_is_no_store_says_so_and_creates_nothing(tmp_path, command):
    empty = tmp_path / "empty"
    empty.mkdir()
    result = cli(*command, cwd=empty)
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "no Chronicle store here" in result.stderr and "chronicle run" in result.stderr and "--db" in result.stderr
    assert list(empty.iterdir()) == []


#: Commands that record something new, each with a flag that cannot work: refused (exit 2) before the store is opened.
REFUSED_RECORDERS = (("run", "hi", "--workspace", "/nonexistent"), ("run", "hi", "--provider", "scripted:/nonexistent.json"),
                     ("submit", "hi", "--workspace", "/nonexistent"), ("jobs", "submit", "hi", "--provider", "scripted:/nonexistent.json"),
                     ("chat", "--provider", "scripted:/nonexistent.json"))


@pytest.mark.parametrize("command", REFUSED_RECORDERS, ids=lambda c: "-".join(c[:2]))
def test_a_first_run_refused_for_a_bad_flag_creates_no_store(tmp_path, command):
    result = cli(*command, cwd=tmp_path, input="")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "/nonexistent" in result.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [("run", "hi", "--session", "nonexist", "--provider", "scripted:/x.json"),
                                     ("chat", "--session", "nonexist", "--provider", "scripted:/x.json")], ids=["run", "chat"])
def test_continuing_a_session_where_there_is_no_store_says_so_and_creates_nothing(tmp_path, command):
    result = cli(*command, cwd=tmp_path, input="")
    assert result.returncode == 2, (result.stdout, result.stderr)
    assert "no session matches 'nonexist': there is no Chronicle store at" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_resume_all_where_there_is_no_store_has_nothing_to_resume_and_creates_nothing(tmp_path):
    result = cli("resume", "--all", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json_lines(result.stdout) == [{"session_id": None, "status": "nothing_to_resume",
                                          "message": f"no Chronicle store at {tmp_path / '.chronicle' / 'chronicle.db'} yet"}]
    assert list(tmp_path.iterdir()) == []


def test_an_explicit_sqlite_file_that_does_not_exist_is_not_created_by_a_reader(tmp_path):
    result = cli("sessions", "--db", f"sqlite:///{tmp_path / 'nope.db'}")
    assert result.returncode == 1 and f"no Chronicle store at {tmp_path / 'nope.db'}" in result.stderr
    assert not (tmp_path / "nope.db").exists()


def test_the_store_is_found_from_a_subdirectory_like_git(tmp_path):
    project = tmp_path / "project"
    (project / "src" / "deep").mkdir(parents=True)
    sid = _run(tmp_path, project)
    listed = cli("sessions", "--json", cwd=project / "src" / "deep")
    assert listed.returncode == 0, listed.stderr
    assert [row["session_id"] for row in json_lines(listed.stdout)] == [sid]
    assert not (project / "src" / ".chronicle").exists() and not (project / "src" / "deep" / ".chronicle").exists()


def test_a_relative_sqlite_url_is_relative_to_the_current_directory(tmp_path):
    sid = _run(tmp_path, tmp_path, "--db", "sqlite:///stores/rel.db")
    assert (tmp_path / "stores" / "rel.db").is_file()
    listed = cli("sessions", "--json", "--db", f"sqlite:///{tmp_path / 'stores' / 'rel.db'}")
    assert [row["session_id"] for row in json_lines(listed.stdout)] == [sid]


def test_db_before_the_command_is_the_command_s_db(db_url, tmp_path):
    sid = _run(tmp_path, tmp_path, "--db", db_url)
    listed = cli("--db", db_url, "sessions", "--json", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert [row["session_id"] for row in json_lines(listed.stdout)] == [sid]


def test_a_relative_url_one_slash_short_of_an_existing_store_says_how_to_name_it(tmp_path):
    """`sqlite:///tmp/x.db` is ./tmp/x.db (SQLAlchemy's rule); written for /tmp/x.db, the message says
    how to name the file that is there, and creates nothing where the URL pointed."""
    _run(tmp_path, tmp_path, "--db", f"sqlite:///{tmp_path / 'real.db'}")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    slip = f"sqlite://{tmp_path / 'real.db'}"  # one slash short: relative to the current directory
    result = cli("sessions", "--db", slip, cwd=elsewhere)
    assert result.returncode == 1
    assert f"no Chronicle store at {elsewhere}{tmp_path / 'real.db'}" in result.stderr
    assert f"write sqlite:///{tmp_path / 'real.db'}" in result.stderr, result.stderr
    assert list(elsewhere.iterdir()) == []
    plain = cli("sessions", "--db", f"sqlite:///{tmp_path / 'nope.db'}")
    assert plain.returncode == 1 and "write sqlite" not in plain.stderr
