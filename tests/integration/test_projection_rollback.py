"""An upgrade rolled back leaves the read models usable, and a catch-up that cannot progress stops, on both backends.

Every version of a projection keeps its rows in the same tables. An upgrade (summaries v5 → v6 here: the
version monkeypatched in this process, as a newer release would have it) builds them again under the new
version's key; rolled back, the older code found its own tracking row at its old position, over the newer
version's rows, and re-applied events that were already there: an IntegrityError every batch, retried forever
(`sessions`, `cost` and `audit` spun at 100% CPU, printing nothing).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chronicle import Chronicle, ChronicleError
from chronicle.projections.summaries import SummariesProjection
from chronicle.runtime.app.session_listing import current_listing
from chronicle.runtime.read_models import caught_up
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, json_lines, response, text, write_script

OLD, NEW = SummariesProjection.version, SummariesProjection.version + 1


def record(db_url: str, tmp_path: Path, workspace: Path, words: str) -> str:
    script = write_script(tmp_path / f"{words}.json", [response(text(f"said {words}"))])
    done = cli("run", words, "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    return str(json_lines(done.stdout)[-1]["session_id"])


def read_models(db_url: str) -> None:
    """What a read command does first, in this process (where the version may be patched)."""
    store = ChronicleStore(db_url)
    try:
        caught_up(store)
    finally:
        store.close()


def listed(db_url: str, *args: str) -> list[str]:
    shown = cli("sessions", "--json", *args, db=db_url, timeout=60)
    assert shown.returncode == 0, shown.stderr
    return [row["session_id"] for row in json_lines(shown.stdout)]


def test_rolling_an_upgrade_back_rebuilds_the_read_model_instead_of_spinning(db_url, tmp_path, workspace, monkeypatch):
    first = record(db_url, tmp_path, workspace, "one")
    assert listed(db_url) == [first]  # summaries v5 built, at the log's head

    monkeypatch.setattr(SummariesProjection, "version", NEW)  # the upgrade
    read_models(db_url)
    second = record(db_url, tmp_path, workspace, "two")
    read_models(db_url)
    monkeypatch.setattr(SummariesProjection, "version", OLD)  # the rollback (the CLI below runs the released code)

    # the older version's tracking row is behind the log, over the newer version's rows: it is built again
    assert listed(db_url) == [first, second]
    for command in (("cost", "--json"), ("audit", "--json")):
        done = cli(*command, db=db_url, timeout=60)
        assert done.returncode == 0, done.stderr
    store = ChronicleStore(db_url)
    try:
        engine = caught_up(store)
        keys = engine.db.positions([SummariesProjection().key], prefix="projection:summaries:")
        assert keys == {f"projection:summaries:v{OLD}": engine.head()}  # the newer version's row went with its tables
        incremental = engine.dump("summaries")
        engine.rebuild(["summaries"])
        assert engine.dump("summaries") == incremental
    finally:
        store.close()

    # and upgraded again: the newer version finds its row beside the older one's, and builds its tables again too
    monkeypatch.setattr(SummariesProjection, "version", NEW)
    third = record(db_url, tmp_path, workspace, "three")
    store = ChronicleStore(db_url)
    try:
        engine = caught_up(store)
        assert engine.db.positions([SummariesProjection().key], prefix="projection:summaries:") == {
            f"projection:summaries:v{NEW}": engine.head()}
        with engine.read() as tx:
            assert sorted(r[0] for r in tx.rows("SELECT session_id FROM proj_summaries")) == sorted([first, second, third])
    finally:
        store.close()


def test_a_rollback_with_nothing_new_is_not_listed_from_the_other_versions_tables(db_url, tmp_path, workspace, monkeypatch):
    """The older version's row is at the log's head, so `sessions` would take the tables as current without
    opening the store: they are the newer version's, so it reads the aggregates while the engine rebuilds them."""
    first = record(db_url, tmp_path, workspace, "one")
    assert listed(db_url) == [first]
    assert current_listing(db_url) is not None
    monkeypatch.setattr(SummariesProjection, "version", NEW)
    read_models(db_url)
    monkeypatch.setattr(SummariesProjection, "version", OLD)

    assert current_listing(db_url) is None
    assert listed(db_url) == [first]
    assert current_listing(db_url) is not None  # built again by that command, under the older version's key alone


def test_a_catch_up_that_meets_its_own_rows_again_stops_with_the_command_that_rebuilds(db_url, tmp_path, workspace):
    """A position moved back by hand (or tables filled by anything but the engine): the same batch is refused every
    time. One line, exit 1, naming the projection and the command (with the store when a plain one opens another);
    the library raises ChronicleError with the same words."""
    record(db_url, tmp_path, workspace, "one")
    store = ChronicleStore(db_url)
    try:
        engine = caught_up(store)
        key = engine.projections["audit"].key
        with engine.db.transaction() as tx:
            tx.execute(f"UPDATE {engine.db.tracking_table} SET notification_id = %s WHERE application_name = %s", (2, key))
    finally:
        store.close()

    refused = cli("--db", db_url, "audit", timeout=60, cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1, refused.stderr
    assert "the audit read model cannot catch up" in lines[0] and "after log position 2" in lines[0]
    assert "projections rebuild audit` rebuilds it" in lines[0] and "--db" in lines[0]
    assert "Traceback" not in refused.stderr

    with Chronicle(db_url) as chronicle, pytest.raises(ChronicleError, match="the audit read model cannot catch up") as raised:
        chronicle.audit()
    assert raised.value.code == 1

    assert cli("--db", db_url, "projections", "rebuild", "audit", timeout=60, cwd=tmp_path).returncode == 0
    assert cli("--db", db_url, "audit", "--json", timeout=60, cwd=tmp_path).returncode == 0
