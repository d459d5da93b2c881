"""A SQLite store on a disk that is full: the commands say so, and those that only read go on reading.

The disk is a real one: a 2 MB tmpfs mounted for the test (root only; skipped where mounting is refused),
filled with a file of zeros the way a log or a build fills a disk.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from tests.helpers import cli, response, text


@pytest.fixture
def small_disk(tmp_path):
    where = tmp_path / "disk"
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(where)],
                                           capture_output=True).returncode != 0:
        pytest.skip("needs to mount a small tmpfs (root)")
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def fill(disk: Path) -> None:
    with open(disk / "filler", "wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError:
            pass
    stats = os.statvfs(disk)
    assert stats.f_bavail * stats.f_frsize == 0


def a_session(disk: Path, tmp_path: Path) -> tuple[str, str]:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agents": {"main": [response(text("Ok."))]}, "title": ["Hi"]}), encoding="utf-8")
    url = f"sqlite:///{disk / 'chronicle.db'}"
    with Chronicle(url) as app:
        sid = app.run_sync(Agent(name="main", instructions="x", tools=[], provider=f"scripted:{script}"), "hello",
                           workspace=str(tmp_path)).session_id
    return url, sid


def test_a_store_on_a_disk_already_full_is_said_as_the_full_disk_not_as_a_disk_io_error(small_disk, tmp_path):
    url, sid = a_session(small_disk, tmp_path)
    with sqlite3.connect(small_disk / "chronicle.db") as conn:  # as a store no process has open: no -wal, no -shm
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    for leftover in ("chronicle.db-wal", "chronicle.db-shm"):
        (small_disk / leftover).unlink(missing_ok=True)
    fill(small_disk)
    for command in (["sessions"], ["log", sid[:8]], ["history", sid[:8]]):  # each process opens the store anew
        shown = cli(*command, db=url)
        said = f"error: cannot open the database {url}: the disk holding it is full (0 bytes free; SQLite said: "
        assert shown.returncode == 1 and shown.stderr.startswith(said), shown.stderr
        assert "free some space" in shown.stderr and "Check --db" not in shown.stderr
    (small_disk / "filler").unlink()  # space again: the store opens, with everything it held
    with Chronicle(url) as app:
        assert [s["session_id"] for s in app.sessions()] == [sid]


def test_a_store_that_does_not_open_on_a_disk_with_room_keeps_the_drivers_words(tmp_path):
    from chronicle.runtime.store_open import open_failure

    url = f"sqlite:///{tmp_path / 'chronicle.db'}"
    said = open_failure(url, sqlite3.OperationalError("disk I/O error"))
    assert said == f"cannot open the database {url}: disk I/O error. Check --db / CHRONICLE_DB."


def test_a_full_disk_under_an_open_store_lists_and_explains_its_sessions_from_their_events(small_disk, tmp_path, caplog):
    url, sid = a_session(small_disk, tmp_path)
    with Chronicle(url) as app:
        app.log(sid)  # the store open (its -wal and -shm made), the read models not caught up
        fill(small_disk)
        listed = app.sessions()
        assert [(s["session_id"], s["title"], s["turns"], s["cost"]) for s in listed] == [(sid, "Hi", 1, None)]
        assert "the read models cannot catch up (database or disk is full)" in caplog.text
        assert app.why(sid)["decided"]["position"] > 0
        assert app.history(sid, at=1) == [{"role": "user", "content": [{"type": "text", "text": "hello"}]},
                                          {"role": "assistant", "content": [{"type": "text", "text": "Ok."}]}]
        with pytest.raises(ChronicleError, match="is full"):  # cost has no other source than its read model: said
            app.cost(sid)
        shown = cli("sessions", "--json", db=url)  # another process, while this one holds the store open
        assert shown.returncode == 0 and json.loads(shown.stdout)["session_id"] == sid, shown.stderr
        assert "cannot catch up" in shown.stderr
    (small_disk / "filler").unlink()  # space again: the read models catch up, and cost answers
    with Chronicle(url) as app:
        assert [s["session_id"] for s in app.sessions()] == [sid] and app.cost(sid)


def test_a_full_disk_under_an_open_store_still_shows_the_viewers_session_page_from_its_events(small_disk, tmp_path, caplog):
    """`GET /sessions` read the events when the read models could not catch up; the session page failed (503)."""
    from fastapi.testclient import TestClient

    url, sid = a_session(small_disk, tmp_path)
    with Chronicle(url) as app:
        app.log(sid)  # the store open (its -wal and -shm made), the read models not caught up
        fill(small_disk)
        with TestClient(app.http_app(workspace=tmp_path)) as client:
            assert [r["session_id"] for r in client.get("/sessions").json()] == [sid]
            page = client.get(f"/ui/sessions/{sid}")
            assert page.status_code == 200, page.text
            assert "hello" in page.text and "Ok." in page.text and "Hi" in page.text  # the turn and the title, from events
            assert 'id="read-models-note"' in page.text and "the read models cannot catch up" in page.text
            assert "free some space" in page.text
        assert "the read models cannot catch up (database or disk is full)" in caplog.text
    (small_disk / "filler").unlink()  # space again: the page has its read models back, and says nothing of them
    with Chronicle(url) as app, TestClient(app.http_app(workspace=tmp_path)) as client:
        page = client.get(f"/ui/sessions/{sid}")
        assert page.status_code == 200 and 'id="read-models-note"' not in page.text
