"""Sessions recorded by earlier releases replay: identical when nothing that decides the model's answer
changed, and otherwise with the reason, on SQLite and on PostgreSQL (the fixture's rows copied as stored).

tests/fixtures/v1_store.db was recorded by commit 338380d, whose built-in tools had six shorter descriptions
than edition 1 (runtime/tools/editions.py, BEFORE_EDITIONS): asked with those, each of its sessions is the
recording. tests/fixtures/v2_store.db was recorded by ops/make_fixture_v2.py, which gave its loops a tool
`stamp` that no spec records; its sessions cannot be re-asked, and replay says so (exit 1, kind `earlier release`), naming the part.
"""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
import time
from pathlib import Path
from uuid import NAMESPACE_URL, UUID, uuid5

import pytest

from chronicle.runtime.app.replay import Replayer
from chronicle.runtime.compression import SizedZlib
from chronicle.runtime.store import ChronicleStore
from tests.conftest import fresh_pg_url
from tests.helpers import cli, json_lines

from .test_old_stores import FIXTURES, copy_into_postgres


def sid(version: str, n: int) -> UUID:
    return uuid5(uuid5(NAMESPACE_URL, f"https://chronicle.invalid/fixtures/{version}"), f"s{n}")


def old_store(request: pytest.FixtureRequest, version: str, tmp_path: Path) -> str:
    fixture = FIXTURES / f"{version}_store.db"
    if request.param == "sqlite":
        shutil.copy(fixture, tmp_path / "old.db")
        return f"sqlite:///{tmp_path / 'old.db'}"
    url = fresh_pg_url(request.getfixturevalue("pg_database"))
    copy_into_postgres(fixture, url)
    return url


@pytest.fixture(params=["sqlite", "postgres"])
def v1_url(request, tmp_path) -> str:
    return old_store(request, "v1", tmp_path)


@pytest.fixture(params=["sqlite", "postgres"])
def v2_url(request, tmp_path) -> str:
    return old_store(request, "v2", tmp_path)


@pytest.fixture
def fixture_workspace(tmp_path) -> Path:
    """The workspace both fixture scripts ran in (their own was a temporary directory, gone since)."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "hello.txt").write_text("hello world\n", encoding="utf-8")
    return ws


def test_a_session_recorded_by_schema_v1_replays_as_identical_asked_with_the_tool_schemas_of_its_release(v1_url, fixture_workspace):
    result = cli("replay", str(sid("v1", 1)), "--workspace", str(fixture_workspace), "--json", db=v1_url)
    assert result.returncode == 0, result.stdout + result.stderr
    [row] = json_lines(result.stdout)
    assert row["identical"] is True and row["divergence"] is None
    assert (row["turns"], row["model_calls"], row["rechecked"]) == (2, 4, 1)  # the read_file of turn 1 re-ran, and read the same
    assert row["earlier_schemas"] == "before the tool sandbox"
    assert "asked with Chronicle's tool schemas before the tool sandbox" in row["verdict"]


def test_every_session_of_the_v1_fixture_replays_as_identical(v1_url, fixture_workspace):
    """The sub-agent, the failed turn's retried call (re-sent with the request built before the schemas were
    found), the 56-call turn with its v1 snapshot and the 34-turn session with its own."""
    store = ChronicleStore(v1_url)
    try:
        for n, calls in ((2, 1), (3, None), (4, 56), (5, 34)):
            report = asyncio.run(Replayer(store, sid("v1", n), fixture_workspace).run())
            assert report.identical, f"S{n}: {report.verdict()}"
            assert report.earlier_schemas == "before the tool sandbox" and report.exit_code == 0
            assert calls is None or report.model_calls == calls
    finally:
        store.close()


def test_a_turn_that_failed_after_its_retries_replays_without_waiting_out_the_backoff(fixture_workspace, tmp_path):
    """S3 of the v1 fixture: retryable errors until the policy gave up. The replay answers every attempt from the
    recording, so the default backoff (2 s doubling to 30 s, 8 attempts: about 2 minutes) has nothing to wait for."""
    shutil.copy(FIXTURES / "v1_store.db", tmp_path / "old.db")
    store = ChronicleStore(f"sqlite:///{tmp_path / 'old.db'}")
    started = time.monotonic()
    try:
        report = asyncio.run(Replayer(store, sid("v1", 3), fixture_workspace).run())
    finally:
        store.close()
    assert report.identical, report.verdict()
    assert time.monotonic() - started < 30


def test_a_v2_session_offered_a_tool_its_spec_does_not_record_says_why_it_cannot_be_rebuilt(v2_url, fixture_workspace):
    result = cli("replay", str(sid("v2", 1)), "--workspace", str(fixture_workspace), "--json", db=v2_url)
    assert result.returncode == 1, result.stdout + result.stderr
    [row] = json_lines(result.stdout)
    divergence = row["divergence"]
    assert row["identical"] is False and (divergence["turn"], divergence["step"]) == (1, 0)
    assert divergence["kind"] == "earlier release"
    assert divergence["parts"] == {"model": "as recorded", "system": "as recorded", "tools": "changed", "messages": "same count"}
    detail = divergence["detail"]
    assert "recorded by an earlier release (its events predate schema v3; its spec predates tool editions)" in detail
    assert "the tool schemas differ from those recorded (digest 140036c925bb… recorded" in detail
    assert "the recording called stamp, which the session's recorded tools (read_file, list_dir" in detail
    assert row["verdict"].startswith("diverged at turn 1, step 0: earlier release: ")
    assert row["earlier_schemas"] is None


def test_a_v2_session_that_never_called_the_unrecorded_tool_names_the_tool_schemas_alone(v2_url, fixture_workspace):
    store = ChronicleStore(v2_url)
    try:
        report = asyncio.run(Replayer(store, sid("v2", 4), fixture_workspace).run())
    finally:
        store.close()
    assert report.exit_code == 1 and report.divergence is not None
    assert report.divergence.kind == "earlier release" and report.divergence.parts is not None
    assert report.divergence.parts["tools"] == "changed" and report.divergence.parts["system"] == "as recorded"
    assert "the tool schemas differ" in report.divergence.detail and "stamp" not in report.divergence.detail


def test_a_session_recorded_before_editions_in_schema_v3_that_diverges_keeps_its_kind_and_says_what_was_tried(tmp_path):
    """tests/fixtures/delegating_edition1.db (commit cc3fc6f) stores v3 events, which keep no digest of the system
    prompt or the tools: an input edited in the store is a `request fingerprint` divergence (exit 1), as before,
    whose detail says which built-in schemas were tried and whose parts say what the recording tells."""
    shutil.copy(FIXTURES / "delegating_edition1.db", tmp_path / "old.db")
    with sqlite3.connect(tmp_path / "old.db") as conn:
        plain = SizedZlib()  # states are stored compressed (runtime/compression.py)
        [(rowid, state)] = conn.execute("SELECT rowid, state FROM stored_events WHERE topic LIKE '%Turn.Created' "
                                        "AND originator_id IN (SELECT originator_id FROM stored_events WHERE rowid = 7)").fetchall()
        edited = plain.compress(plain.decompress(bytes(state)).replace(b'"count the widgets"', b'"count the gadgets"'))
        conn.execute("UPDATE stored_events SET state = ? WHERE rowid = ?", (edited, rowid))
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "CHANGES.md").write_text("three widgets: a, b, c\n")
    result = cli("replay", "f002554b", "--workspace", str(tmp_path / "ws"), "--json", db=f"sqlite:///{tmp_path / 'old.db'}")
    assert result.returncode == 1, result.stdout + result.stderr
    divergence = json_lines(result.stdout)[0]["divergence"]
    assert (divergence["turn"], divergence["step"], divergence["kind"]) == (1, 0, "request fingerprint")
    assert divergence["detail"].endswith("; recorded before tool editions: edition 1 and the built-in tools' schemas of the "
                                         "releases before it (before tests_run, before the tool sandbox) were tried")
    assert divergence["parts"] == {"model": "as recorded", "system": "not recorded", "tools": "not recorded", "messages": "same count"}
