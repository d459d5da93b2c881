"""A `chronicle … SID` hint printed by a command run on a store named with --db, pasted as printed, acts on that store:
it carries `--db` where a plain command would open another store (runtime/pasteable.py)."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tests.helpers import cli, json_lines, response, text, tool_use, write_script


def started(tmp_path: Path, cwd: Path, db: str) -> str:
    """A session of one turn that called a tool, recorded in the store at `db` by a `run --db`."""
    script = write_script(tmp_path / "s.json", [response(tool_use("tu_1", "list_dir", path=".")), response(text("looked"))])
    run = cli("run", "look around", "--provider", f"scripted:{script}", "--workspace", str(cwd), "--json", "--db", db, cwd=cwd)
    assert run.returncode == 0, run.stderr
    return str(json_lines(run.stdout)[0]["session_id"])


def hint_in(output: str) -> str:
    """The one `chronicle …` command quoted in a line of output."""
    [hint] = re.findall(r"`(chronicle [^`]+)`", output)
    return hint


def pasted(hint: str, cwd: Path, env: dict[str, str] | None = None):  # noqa: ANN201 - a CompletedProcess
    """Run the hint as a POSIX shell would: split as it splits it, the leading `chronicle` being the program."""
    words = shlex.split(hint)
    assert words[0] == "chronicle"
    return cli(*words[1:], cwd=cwd, env=env)


def turns_on_branch(db: str, sid: str, cwd: Path) -> int:
    listed = cli("sessions", "--json", "--db", db, cwd=cwd)
    [row] = [r for r in json_lines(listed.stdout) if r["session_id"] == sid]
    return int(row["turns"])


def test_undo_on_a_named_store_prints_a_redo_that_pasted_puts_the_turn_back_there(tmp_path):
    here = tmp_path / "project"
    here.mkdir()
    db = f"sqlite:///{tmp_path / 'stores with spaces' / 'agents.db'}"
    sid = started(tmp_path, here, db)
    for form in (("--db", db, "undo", sid), ("undo", sid, "--db", db)):  # the root --db and the command's own
        undone = cli(*form, cwd=here)
        assert undone.returncode == 0, undone.stderr
        assert turns_on_branch(db, sid, here) == 0
        hint = hint_in(undone.stdout)
        assert hint == f"chronicle --db {shlex.quote(db)} redo {sid}"
        redone = pasted(hint, here)
        assert redone.returncode == 0, redone.stderr
        assert turns_on_branch(db, sid, here) == 1
    assert not (here / ".chronicle").exists()  # no paste went to (or made) a default store


def test_a_shell_whose_chronicle_db_names_the_store_gets_the_plain_command(tmp_path):
    here = tmp_path / "project"
    here.mkdir()
    db = f"sqlite:///{tmp_path / 'agents.db'}"
    sid = started(tmp_path, here, db)
    for form in (("undo", sid), ("--db", db, "undo", sid)):  # CHRONICLE_DB alone, and repeated by the root --db
        undone = cli(*form, cwd=here, env={"CHRONICLE_DB": db})
        assert undone.returncode == 0, undone.stderr
        assert hint_in(undone.stdout) == f"chronicle redo {sid}"
        assert pasted(hint_in(undone.stdout), here, env={"CHRONICLE_DB": db}).returncode == 0
        assert turns_on_branch(db, sid, here) == 1


def test_why_json_saw_history_pasted_shows_the_messages_from_the_named_store(tmp_path):
    here = tmp_path / "project"
    here.mkdir()
    db = f"sqlite:///{tmp_path / 'agents.db'}"
    sid = started(tmp_path, here, db)
    why = cli("--db", db, "why", sid, "--json", cwd=here)
    assert why.returncode == 0, why.stderr
    chain = json.loads(why.stdout)
    history = chain["saw"]["history"]
    assert isinstance(history, str) and history.startswith(f"chronicle --db {db} history {sid} --at ")
    shown = pasted(history + " --json", here)
    assert shown.returncode == 0, shown.stderr
    assert len(json_lines(shown.stdout)) == chain["saw"]["messages"]
    # The human form prints the same command, and the log it points at.
    human = cli("why", sid, "--db", db, cwd=here)
    assert history in human.stdout and f"`chronicle --db {db} log {sid[:8]}`" in human.stdout
    assert pasted(f"chronicle --db {db} log {sid[:8]}", here).returncode == 0


def test_a_postgresql_store_named_with_a_password_gets_a_hint_without_it(tmp_path, pg_database):
    """The password is left out of the hint (libpq takes it from PGPASSWORD or ~/.pgpass then); this server trusts
    local logins, so the paste works as printed."""
    from tests.conftest import fresh_pg_url

    here = tmp_path / "project"
    here.mkdir()
    plain = fresh_pg_url(pg_database)
    parts = urlsplit(plain)
    if parts.password is not None:
        pytest.skip("the test server's URL carries a password: a paste without it would not log in")
    secret = "hunter2-pasteable"
    db = urlunsplit(parts._replace(netloc=f"{parts.username}:{secret}@{parts.netloc.rpartition('@')[2]}"))
    sid = started(tmp_path, here, db)
    undone = cli("--db", db, "undo", sid, cwd=here)
    assert undone.returncode == 0, undone.stderr
    assert secret not in undone.stdout + undone.stderr
    hint = hint_in(undone.stdout)
    assert hint == f"chronicle --db {shlex.quote(plain)} redo {sid}"
    redone = pasted(hint, here)
    assert redone.returncode == 0, redone.stderr
    assert turns_on_branch(db, sid, here) == 1
