"""A SQLite store that is damaged, locked or on a full disk is said as what it is, with what to do, by every
command (exit 1): before, `doctor` found "no problems" in a file with a damaged page, the commands that met the
damage, a held lock or a full disk said "internal error … Nothing recorded was lost … please report it", and a
truncated store was "not an SQLite database Chronicle can use" (exit 2), as if it were somebody else's file."""

from __future__ import annotations

import random
import sqlite3
import subprocess
import sys
import time
from contextlib import closing
from pathlib import Path

import pytest

from chronicle import Chronicle, ChronicleError
from chronicle.runtime.app.errors import known_failure
from tests.helpers import cli, json_lines, response, text, tool_use, write_script


def _store(tmp_path: Path, sessions: int = 6) -> tuple[Path, list[str]]:
    """A store with a few sessions, its WAL checkpointed into the file, so that its pages are where dbstat says."""
    path = tmp_path / "store.db"
    script = write_script(tmp_path / "script.json", [response(text("checking"), tool_use("t1", "read_file", path="x.txt"),
                                                              stop="tool_use"), response(text("all done " * 40))])
    (tmp_path / "x.txt").write_text("hello")
    ids = []
    for n in range(sessions):
        run = cli("run", f"look {n}", "--provider", f"scripted:{script}", "--json", "--yes", "--workspace", str(tmp_path),
                  db=f"sqlite:///{path}")
        assert run.returncode == 0, run.stderr
        ids.append(json_lines(run.stdout)[0]["session_id"])
    for reader in ("audit", "cost"):  # the read models are brought up to date by their first reader
        assert cli(reader, db=f"sqlite:///{path}").returncode == 0
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return path, ids


def _damage(path: Path, table: str) -> None:
    """3 KB of noise inside a leaf page of `table`, as a bad disk block or a torn copy leaves it."""
    with closing(sqlite3.connect(path)) as conn:
        pages = [p for (p,) in conn.execute("SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
                                            (table,))]
        page = pages[len(pages) // 2]  # not the first: the oldest event, which every open reads, is said at the open
        (size,) = conn.execute("PRAGMA page_size").fetchone()
    noise = random.Random(7)
    with open(path, "r+b") as handle:
        handle.seek((page - 1) * size + 500)
        handle.write(bytes(noise.randrange(256) for _ in range(3000)))


def _said_damaged(result: subprocess.CompletedProcess[str], path: Path) -> None:
    assert result.returncode == 1, result.stderr
    assert f"the store {path} is damaged" in result.stderr and ".recover" in result.stderr, result.stderr
    assert "internal error" not in result.stderr and "Nothing recorded was lost" not in result.stderr


def test_a_damaged_read_model_is_found_by_doctor_and_said_as_damage_by_the_commands_reading_it(tmp_path):
    path, ids = _store(tmp_path)
    _damage(path, "proj_audit")
    db = f"sqlite:///{path}"
    for repair in ([], ["--repair"]):
        check = cli("doctor", "--json", *repair, db=db)
        assert check.returncode == 1, check.stdout + check.stderr
        (finding,) = json_lines(check.stdout)
        assert finding["check"] == "damaged_file" and not finding["repaired"]
        assert "proj_audit" in finding["detail"] and "the event log is whole" in finding["detail"]
    told = cli("doctor", db=db)
    assert told.returncode == 1 and ".recover" in told.stdout and "no problems found" not in told.stdout
    _said_damaged(cli("audit", db=db), path)


def test_a_damaged_event_log_is_said_as_damage_not_as_an_internal_error_nothing_was_lost_in(tmp_path):
    path, ids = _store(tmp_path)
    _damage(path, "stored_events")
    db = f"sqlite:///{path}"
    check = cli("doctor", "--json", db=db)
    assert check.returncode == 1, check.stderr
    (finding,) = json_lines(check.stdout)
    assert finding["check"] == "damaged_file" and "stored_events" in finding["detail"]
    assert "events may be lost" in finding["detail"]
    _said_damaged(cli("verify", db=db), path)
    with pytest.raises(ChronicleError) as raised:  # a program is told the same, with the same code
        with Chronicle(db) as app:
            app.verify()
    assert raised.value.code == 1 and f"the store {path} is damaged" in str(raised.value)


def test_a_truncated_store_is_damaged_while_a_file_of_noise_is_not_a_store(tmp_path):
    path, _ = _store(tmp_path, sessions=4)
    with open(path, "r+b") as handle:
        handle.truncate(path.stat().st_size // 2)
    for command in (["sessions"], ["doctor"], ["run", "hi", "--provider", "scripted:/nonexistent.json"]):
        _said_damaged(cli(*command, db=f"sqlite:///{path}"), path)
    noise = tmp_path / "noise.db"
    noise.write_bytes(random.Random(3).randbytes(4096))
    refused = cli("sessions", db=f"sqlite:///{noise}")
    assert refused.returncode == 2 and "is not an SQLite database Chronicle can use" in refused.stderr


def test_a_write_lock_held_past_the_busy_timeout_names_the_lock_not_an_internal_error(tmp_path):
    path, ids = _store(tmp_path, sessions=1)
    holder = subprocess.Popen([sys.executable, "-c", "import sqlite3, sys, time\n"
                               f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\nc.execute('BEGIN IMMEDIATE')\n"
                               "print('held', flush=True)\ntime.sleep(60)"], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        result = cli("submit", "more", "--session", ids[0], db=f"sqlite:///{path}", env={"CHRONICLE_SQLITE_BUSY_TIMEOUT": "1"})
        took = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 1, result.stderr
    assert f"another process holds the write lock of {path}" in result.stderr and "internal error" not in result.stderr
    assert took < 20


def test_a_full_disk_is_said_as_one_to_free_space_on():
    conn = sqlite3.connect(":memory:")  # SQLite's own SQLITE_FULL, from a database allowed one page more than it has
    conn.execute("CREATE TABLE t (x BLOB)")
    (pages,) = conn.execute("PRAGMA page_count").fetchone()
    conn.execute(f"PRAGMA max_page_count = {pages + 1}")
    with pytest.raises(sqlite3.OperationalError) as full:
        conn.execute("INSERT INTO t VALUES (?)", (b"x" * 100_000,))
    known = known_failure(full.value, "sqlite:////srv/agents/chronicle.db")
    assert known is not None and known.code == 1
    assert str(known).startswith("the disk holding the store /srv/agents/chronicle.db is full (database or disk is full): "
                                 "free some space")
