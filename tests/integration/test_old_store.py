"""The store written by schema v1 (tests/fixtures/v1_store.db) loads, continues and rebuilds."""

from __future__ import annotations

import shutil
from pathlib import Path
from uuid import NAMESPACE_URL, UUID, uuid5

import pytest

from chronicle.projections.history import conversation
from chronicle.projections.summaries import summaries
from chronicle.runtime.read_models import caught_up
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, json_lines, response, text, write_script

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "v1_store.db"
NS = uuid5(NAMESPACE_URL, "https://chronicle.invalid/fixtures/v1")
S1, S2, S3, S4, S5 = (uuid5(NS, f"s{i}") for i in range(1, 6))
OVERLOADED = {"kind": "overloaded_error", "message": "Overloaded", "status": None, "retry_after_s": None}


@pytest.fixture
def old_url(tmp_path) -> str:
    db = tmp_path / "old.db"
    shutil.copy(FIXTURE, db)
    return f"sqlite:///{db}"


def replay_without_snapshots(store: ChronicleStore, aggregate_id: UUID):  # type: ignore[no-untyped-def]
    aggregate = None
    for event in store.events.get(aggregate_id):
        aggregate = event.mutate(aggregate)
    return aggregate


def comparable(aggregate) -> dict:  # type: ignore[no-untyped-def]
    """State to compare, less what a v1 snapshot cannot know: step times (upcast to None)."""
    state = {k: v for k, v in vars(aggregate).items() if k not in ("_pending_events", "_modified_on")}
    if "steps" in state:
        state["steps"] = [{k: v for k, v in step.items() if k != "at"} for step in state["steps"]]
    return state


def test_the_fixture_really_holds_version_1_events_and_snapshots(old_url):
    store = ChronicleStore(old_url)
    with store.recorder.datastore.transaction(commit=False) as c:
        c.execute("SELECT state FROM stored_events WHERE topic LIKE '%ModelCallRetried'")
        assert all(b'"error"' not in bytes(r[0]) for r in c.fetchall())
        c.execute("SELECT COUNT(*) FROM stored_snapshots")
        assert c.fetchone()[0] == 2


def test_v1_snapshots_load_through_the_aggregate_upcasters_to_the_state_events_give(old_url):
    store = ChronicleStore(old_url)
    long_turn = store.session(S4).turns[0]
    from_snapshot = store.turn(long_turn)
    assert from_snapshot.version > 100 and store.snapshots is not None
    assert from_snapshot.retries[0]["error"] == OVERLOADED
    assert comparable(from_snapshot) == comparable(replay_without_snapshots(store, long_turn))
    # v1 snapshots hold no step times: the snapshot's steps come back with None, later events' with a time.
    untimed = [step for step in from_snapshot.steps if step["at"] is None]
    assert untimed and from_snapshot.steps[: len(untimed)] == untimed

    busy = store.session(S5)
    assert busy.version > 100 and busy.title_error is None and len(busy.turns) == 34
    assert comparable(busy) == comparable(replay_without_snapshots(store, S5))


def test_v1_responses_upcast_to_v2_with_stop_details_from_events_and_snapshots(old_url):
    store = ChronicleStore(old_url)
    with store.recorder.datastore.transaction(commit=False) as c:
        c.execute("SELECT state FROM stored_events WHERE topic LIKE '%ModelResponded'")
        assert all(b"stop_details" not in bytes(r[0]) for r in c.fetchall())
    long_turn = store.session(S4).turns[0]
    for turn in (store.turn(long_turn), replay_without_snapshots(store, long_turn)):
        assert turn.steps and all("stop_details" in s["response"] and s["response"]["stop_details"] is None for s in turn.steps)
        assert turn.last_response is not None and turn.last_response.stop_details is None


def test_v1_retry_events_upcast_to_structured_errors(old_url):
    store = ChronicleStore(old_url)
    failed = store.turn(store.session(S3).turns[0])
    assert failed.status == "failed"
    assert [r["error"] for r in failed.retries] == [OVERLOADED, OVERLOADED]


def test_a_v1_session_continues_with_another_turn_through_the_cli(old_url, tmp_path, workspace):
    script = write_script(tmp_path / "more.json", [response(text("Still here."), usage=(500, 7))])
    run = cli("run", "one more thing", "--session", str(S1), "--provider", f"scripted:{script}", "--workspace", str(workspace), db=old_url)
    assert run.returncode == 0, run.stderr
    history = json_lines(cli("history", str(S1), "--json", db=old_url).stdout)
    said = [b.get("text") for m in history for b in m["content"] if b["type"] == "text"]
    assert said[0] == "what is in hello.txt?" and said[-2:] == ["one more thing", "Still here."]
    assert "and once more" not in said  # the undone turn stays off the branch
    store = ChronicleStore(old_url)
    assert store.session(S1).title == "Reading hello.txt"  # kept: the title hook only titles untitled sessions


def test_every_projection_rebuilds_from_the_v1_store_to_the_expected_rows(old_url):
    rebuilt = cli("projections", "rebuild", db=old_url)
    assert rebuilt.returncode == 0, rebuilt.stderr
    status = json_lines(cli("projections", "status", "--json", db=old_url).stdout)
    assert [(s["name"], s["lag"]) for s in status] == [("history", 0), ("summaries", 0), ("cost", 0), ("audit", 0)]

    # cost: usage of the fixture script x the price table, by hand (USD per million tokens)
    sonnet = (1010 * 3 + 65 * 15 + 50 * 3.75 + 150 * 0.30) / 1e6  # S1's five model calls
    title = (30 * 1 + 6 * 5) / 1e6                                  # S1's title call on haiku 4.5
    helper = (40 * 1 + 9 * 5) / 1e6                                 # S2, the sub-agent, on haiku 4.5
    cost = {o["scope"]: o for o in json_lines(cli("cost", str(S1), "--json", db=old_url).stdout)}
    assert cost["self"]["usd"] == pytest.approx(sonnet + title, abs=1e-6)
    assert cost["total"]["usd"] == pytest.approx(sonnet + title + helper, abs=1e-6)
    assert cost["child"]["session_id"] == str(S2) and cost["child"]["usd"] == pytest.approx(helper, abs=1e-6)
    assert (cost["self"]["input_tokens"], cost["self"]["cache_creation_input_tokens"], cost["self"]["cache_read_input_tokens"]) == (1040, 50, 150)

    audit = json_lines(cli("audit", "--json", db=old_url).stdout)
    retries = [a for a in audit if a["kind"] == "retry"]
    assert len(retries) == 3 and all(a["detail"]["error"]["kind"] == "overloaded_error" for a in retries)
    assert [a["session_id"] for a in audit if a["kind"] == "undo"] == [str(S1)]
    sub = next(a for a in audit if a["kind"] == "subagent_start")
    assert sub["session_id"] == str(S2) and sub["links"]["parent_session_id"] == str(S1)
    failed_tool = [a for a in audit if a["kind"] == "tool_call" and a["is_error"]]
    assert [(a["name"], a["turn"], a["detail"]["input"]) for a in failed_tool] == [("read_file", 2, {"file": "hello.txt"})]

    engine = caught_up(ChronicleStore(old_url))
    with engine.read() as tx:
        messages = conversation(tx, str(S1))
        titles = summaries(tx)
    assert sorted({m["turn"] for m in messages}) == [1, 2]
    assert [m["role"] for m in messages if m["turn"] == 1] == ["user", "assistant", "user", "assistant"]
    assert titles[str(S1)]["title"] == "Reading hello.txt" and titles[str(S1)]["first_input"] == "what is in hello.txt?"
