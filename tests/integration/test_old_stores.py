"""Stores written by earlier schemas (tests/fixtures/v1_store.db, v2_store.db) load, continue and
rebuild to the rows the last schema-v2 code gave, on SQLite and on PostgreSQL.

The PostgreSQL variant copies the fixture's stored events and snapshots byte for byte into a fresh
schema (the chain recorder links them as it would any insert), so both backends read the same old
rows. The expected projection rows (tests/fixtures/v*_rows.json) were written by the last code of
schema v2, before the v3 events: a v3 event shape (or an upcast) that a projection reads
differently shows as a changed row. Rewrite them only on purpose:
`CHRONICLE_WRITE_ROWS=1 pytest tests/integration/test_old_stores.py -k rows`.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from uuid import NAMESPACE_URL, UUID, uuid5

import pytest
from eventsourcing.persistence import StoredEvent

from chronicle.runtime.doctor import examine
from chronicle.runtime.read_models import caught_up
from chronicle.runtime.store import ChronicleStore
from tests.conftest import fresh_pg_url
from tests.helpers import cli, json_lines, response, text, write_script

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
S1 = {v: uuid5(uuid5(NAMESPACE_URL, f"https://chronicle.invalid/fixtures/{v}"), "s1") for v in ("v1", "v2")}
#: Tables and columns whose rows the fixtures pin (what users read: history, cost, audit, summaries).
PINNED = {
    "proj_history_turns": "turn_id, session_id, number, input_text, status, final_text, reason, started_at, ended_at",
    # `content` is stored only where it differs from `wire` since history v6: read as before.
    "proj_history_messages": "turn_id, seq, step, role, COALESCE(content, wire) AS content, stop_reason, at",
    "proj_history_branch": "session_id, idx, turn_id",
    "proj_summaries": "session_id, first_input, title, title_model, titled_at, title_error, compaction_summary, compacted_at, "
                      "compactions",
    "proj_cost_calls": "call_key, session_id, turn_id, source, model, day, input_tokens, output_tokens, "
                       "cache_creation_input_tokens, cache_read_input_tokens, usd",
    "proj_audit": "at, session_id, turn_id, turn, tool_call_id, kind, name, status, is_error, detail, links",
}


def copy_into_postgres(fixture: Path, url: str) -> None:
    """The fixture's events and snapshots, as stored, into the fresh store at `url`."""
    store = ChronicleStore(url)
    conn = sqlite3.connect(fixture)
    try:
        events = [StoredEvent(originator_id=UUID(o), originator_version=v, topic=t, state=bytes(s))
                  for o, v, t, s in conn.execute("SELECT originator_id, originator_version, topic, state FROM stored_events ORDER BY rowid")]
        snapshots = [StoredEvent(originator_id=UUID(o), originator_version=v, topic=t, state=bytes(s))
                     for o, v, t, s in conn.execute("SELECT originator_id, originator_version, topic, state FROM stored_snapshots")]
    finally:
        conn.close()
    store.recorder.insert_events(events)
    assert store.snapshots is not None
    store.snapshots.recorder.insert_events(snapshots)
    store.close()


@pytest.fixture(params=["v1", "v2"])
def version(request) -> str:
    return request.param


@pytest.fixture(params=["sqlite", "postgres"])
def old_url(request, version, tmp_path) -> str:
    fixture = FIXTURES / f"{version}_store.db"
    if request.param == "sqlite":
        db = tmp_path / "old.db"
        shutil.copy(fixture, db)
        return f"sqlite:///{db}"
    url = fresh_pg_url(request.getfixturevalue("pg_database"))
    copy_into_postgres(fixture, url)
    return url


def replay_without_snapshots(store: ChronicleStore, aggregate_id: UUID):  # type: ignore[no-untyped-def]
    aggregate = None
    for event in store.events.get(aggregate_id):
        aggregate = event.mutate(aggregate)
    return aggregate


def state(aggregate) -> dict:  # type: ignore[no-untyped-def]
    """State to compare, less what a v1 snapshot cannot know: step times (upcast to None)."""
    out = {k: v for k, v in vars(aggregate).items() if k not in ("_pending_events", "_modified_on")}
    if "steps" in out:
        out["steps"] = [{k: v for k, v in step.items() if k != "at"} for step in out["steps"]]
    return out


def pinned_rows(store: ChronicleStore) -> dict[str, list[str]]:
    engine = caught_up(store)
    rows: dict[str, list[str]] = {}
    with engine.db.transaction(commit=False) as tx:
        for table, columns in PINNED.items():
            found = tx.dicts(f"SELECT {columns} FROM {table}")
            rows[table] = sorted(json.dumps(r, sort_keys=True, default=str) for r in found)
    return rows


def test_every_aggregate_of_an_old_store_loads_and_its_snapshots_agree_with_its_events(old_url):
    store = ChronicleStore(old_url)
    sessions = list(store.sessions())
    assert len(sessions) >= 5
    snapshotted = 0
    for session in sessions:
        assert state(session) == state(replay_without_snapshots(store, session.id))
        snapshotted += session.version > 100
        for turn in store.head_turns(session):
            assert state(turn) == state(replay_without_snapshots(store, turn.id))
            snapshotted += turn.version > 100
            for call in store.tool_calls_of(turn):
                assert call.resolved and call.result_block().tool_use_id == call.tool_use_id
    assert snapshotted >= 2
    store.close()


def test_history_of_the_present_shows_what_the_content_models_give_for_every_old_session(old_url):
    """`history` builds its wire messages without the content models where the recorded blocks are
    already wire form (domain/context_wire.py); on stores of every schema, including compacted and
    forked sessions, that must be exactly the messages the models give."""
    from chronicle.runtime.app import queries

    store = ChronicleStore(old_url)
    shown = 0
    for session in store.sessions():
        expected = [m.wire() for m in queries.history_messages(store, session.id)]
        assert queries.history(store, session.id) == expected, session.id
        shown += len(expected)
    assert shown >= 20
    store.close()


def test_an_old_store_rebuilds_every_projection_to_the_rows_its_own_code_gave(old_url, version):
    expected_file = FIXTURES / f"{version}_rows.json"
    store = ChronicleStore(old_url)
    rows = pinned_rows(store)
    store.close()
    if os.environ.get("CHRONICLE_WRITE_ROWS") == "1" and old_url.startswith("sqlite"):
        expected_file.write_text(json.dumps(rows, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    expected = json.loads(expected_file.read_text(encoding="utf-8"))
    assert rows == expected
    rebuilt = cli("projections", "rebuild", db=old_url)
    assert rebuilt.returncode == 0, rebuilt.stderr
    with closing(ChronicleStore(old_url)) as store:
        assert pinned_rows(store) == expected


def test_an_old_session_continues_with_one_more_turn(old_url, version, tmp_path, workspace):
    script = write_script(tmp_path / "more.json", [response(text("Still here."), usage=(500, 7))])
    sid = S1[version]
    run = cli("run", "one more thing", "--session", str(sid), "--provider", f"scripted:{script}", "--workspace", str(workspace), db=old_url)
    assert run.returncode == 0, run.stderr
    history = json_lines(cli("history", str(sid), "--json", db=old_url).stdout)
    said = [b.get("text") for m in history for b in m["content"] if b["type"] == "text"]
    assert said[0] == "what is in hello.txt?" and said[-2:] == ["one more thing", "Still here."]
    assert "and once more" not in said  # the undone turn stays off the branch
    results = [b for m in history for b in m["content"] if b["type"] == "tool_result"]
    assert results and all(r["content"] for r in results)


def test_every_event_of_an_old_store_fits_the_vocabulary_once_upcast(old_url):
    """What rebuilding after a schema change rests on: each old event, read by today's code, has the
    fields today's readers expect (`chronicle doctor` reports any that does not)."""
    with closing(ChronicleStore(old_url)) as store:
        assert [f.as_json() for f in examine(store)] == []
        assert store.max_position() > 500


def test_an_old_session_exports_and_verifies_with_its_sub_agent_and_an_old_fork_with_what_it_inherits(
        old_url, version, tmp_path, request):
    """Sub-agents of old stores are named by their own `parent_session_id` alone (their ids were not
    derived from a delegate call), so the tree is found from that too."""
    from chronicle.domain.ids import lease_id
    from chronicle.runtime.chain_reader import LogReader

    sid = str(S1[version])
    listed = json_lines(cli("sessions", "--json", "--all", db=old_url).stdout)
    children = [s["session_id"] for s in listed if s["parent_session_id"] == sid]
    assert children
    bundle = tmp_path / "tree.json"
    assert cli("export", sid, "-o", str(bundle), db=old_url).returncode == 0
    manifest = json.loads(bundle.read_text())["manifest"]
    assert manifest["sessions"] == [sid, *children] and manifest["counts"]["sessions"] == 2

    store = ChronicleStore(old_url)
    ids = [i for s in (sid, *children) for i in (*store.aggregate_ids_of(store.session(UUID(s))), lease_id(UUID(s)))]
    verdict = json.loads(cli("verify", sid, "--json", db=old_url).stdout)
    assert verdict["ok"] and verdict["events"] == len(LogReader(store).events_of(ids)), verdict
    store.close()

    def target(name: str) -> str:
        if old_url.startswith("sqlite"):
            return f"sqlite:///{tmp_path / name}"
        return fresh_pg_url(request.getfixturevalue("pg_database"))

    moved = target("tree.db")
    assert cli("import", str(bundle), db=moved).returncode == 0
    cost = [{k: v for k, v in row.items() if k != "position"} for row in json_lines(cli("cost", sid, "--json", db=moved).stdout)]
    assert cost == json_lines(cli("cost", sid, "--json", db=old_url).stdout) and any(r["scope"] == "child" for r in cost)

    for fork in [s["session_id"] for s in listed if s["forked_from"]]:
        path = tmp_path / f"{fork}.json"
        assert cli("export", fork, "-o", str(path), db=old_url).returncode == 0
        into = target(f"{fork}.db")
        assert cli("import", str(path), db=into).returncode == 0
        args = ("history", fork, "--json")
        shown = cli(*args, db=into)
        assert shown.returncode == 0 and shown.stdout == cli(*args, db=old_url).stdout, shown.stderr


def test_log_tree_and_export_traces_find_an_old_stores_sub_agent_as_verify_does(old_url, version):
    """The v1/v2 sub-agents are linked by `parent_session_id` alone: `log --tree` and `export-traces`
    walk the same tree `export` and `verify` do, so the child's events and spans are there too."""
    sid = str(S1[version])
    listed = json_lines(cli("sessions", "--json", "--all", db=old_url).stdout)
    children = [s["session_id"] for s in listed if s["parent_session_id"] == sid]
    assert children
    logged = cli("log", sid, "--tree", "--json", db=old_url)
    assert logged.returncode == 0, logged.stderr
    assert {e["session_id"] for e in json_lines(logged.stdout)} == {sid, *children}
    traced = cli("export-traces", sid, "--json", db=old_url)
    assert traced.returncode == 0, traced.stderr
    assert {s["attributes"]["gen_ai.conversation.id"] for s in json_lines(traced.stdout)} == {sid, *children}
    alone = cli("export-traces", sid, "--json", "--no-children", db=old_url)
    assert {s["attributes"]["gen_ai.conversation.id"] for s in json_lines(alone.stdout)} == {sid}
