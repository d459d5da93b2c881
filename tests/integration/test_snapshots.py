"""Turn snapshots: only the newest is kept, so a long turn's storage grows linearly."""

from __future__ import annotations

from datetime import datetime, timezone
from uuid import UUID, uuid4

from chronicle.domain.content import ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock
from chronicle.domain.turn import Turn
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.timetravel import turns_as_of

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def long_turn(store: ChronicleStore, steps: int) -> Turn:
    """A turn saved event by event, as the loop saves it: snapshots are taken on the way."""
    turn = Turn(id=uuid4(), session_id=uuid4(), input_id="in", number=1, input_text="go", agent="main", timestamp=NOW)
    turn.start(NOW)
    store.save(turn)
    for k in range(steps):
        use = ToolUseBlock(id=f"toolu_{k}", name="lookup", input={"key": k})
        turn.record_response(ModelResponse(content=[TextBlock(text="looking"), use], stop_reason="tool_use"), NOW)
        store.save(turn)
        turn.record_tool_results([ToolResultBlock(tool_use_id=use.id, content=f"record {k}")], NOW)
        store.save(turn)
    return turn


def snapshot_versions(store: ChronicleStore, aggregate_id: UUID) -> list[int]:
    assert store.snapshots is not None
    return [s.originator_version for s in store.snapshots.get(aggregate_id)]


def replayed(store: ChronicleStore, aggregate_id: UUID, up_to: int | None = None) -> Turn:
    state = None
    for event in store.events.get(aggregate_id, lte=up_to):
        state = event.mutate(state)
    assert isinstance(state, Turn)
    return state


def test_a_long_turn_keeps_only_its_newest_snapshot_and_loads_as_its_events_say(db_url):
    store = ChronicleStore(db_url)
    turn = long_turn(store, 160)  # 322 events: snapshots would be taken at 100, 200 and 300
    assert snapshot_versions(store, turn.id) == [300]
    cold = ChronicleStore(db_url)
    assert vars(cold.turn(turn.id)) == vars(replayed(cold, turn.id))


def test_an_old_version_of_a_turn_still_loads_after_its_snapshot_was_pruned(db_url):
    store = ChronicleStore(db_url)
    turn = long_turn(store, 110)
    cold = ChronicleStore(db_url)
    assert vars(cold.turn(turn.id, version=150)) == vars(replayed(cold, turn.id, up_to=150))
    assert len(cold.turn(turn.id, version=150).steps) == 74


def test_time_travel_within_a_turn_reads_its_events_not_its_snapshots(db_url):
    store = ChronicleStore(db_url)
    turn = long_turn(store, 110)
    positions = [p for p, _ in store.events_with_positions([turn.id])]
    event_50 = positions[49]
    (past,) = turns_as_of(store, [turn.id], event_50, datetime(2000, 1, 1, tzinfo=timezone.utc))
    assert past.version == 50 and len(past.steps) == 24


def test_snapshots_taken_from_the_aggregates_in_hand_are_what_their_events_give(db_url, workspace, tmp_path):
    """A snapshot due at the version a save reaches is taken from the aggregate being saved, not
    read back: a real loop's long turn and a session of many saves load from those snapshots as
    their events say, and `verify` re-derives each one from the events."""
    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.runtime.sessions import start_session
    from tests.helpers import cli, response, text, tool_use, write_script

    steps = [response(tool_use(f"r{k}", "read_file", path=f"note-{k}.txt")) for k in range(55)]
    script = write_script(tmp_path / "s.json", [*steps, response(text("listed"))])
    ran = cli("run", "read them", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--max-iterations", "80",
              "--json", db=db_url)
    assert ran.returncode == 0, ran.stderr
    store = ChronicleStore(db_url)
    (sid,) = store.session_ids()
    turn_id = store.session(sid).turns[0]
    assert store.turn(turn_id).version > 100 and snapshot_versions(store, turn_id) == [100]

    session, _ = start_session(store, AgentSpec(name="main", workspace=str(workspace)), "first")
    for k in range(105):
        store.update_session(session.id, lambda s, k=k: s.queue_input(f"in-{k}", f"input {k}", NOW))
    assert 100 in snapshot_versions(store, session.id)

    cold = ChronicleStore(db_url)
    assert vars(cold.turn(turn_id)) == vars(replayed(cold, turn_id))
    again = None
    for event in cold.events.get(session.id):
        again = event.mutate(again)
    assert vars(cold.session(session.id)) == vars(again)
    verified = cli("verify", db=db_url)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_long_turn_snapshots_on_a_growing_schedule_and_once_more_as_it_ends(db_url):
    """Not every 100 events: a 260-step turn (522 events) keeps its snapshot at 400 rather than
    taking one at 500; completing it 123 events past that takes one at its end."""
    store = ChronicleStore(db_url)
    turn = long_turn(store, 260)
    assert turn.version == 522 and snapshot_versions(store, turn.id) == [400]
    turn.complete(NOW)
    store.save(turn)
    assert snapshot_versions(store, turn.id) == [turn.version]
    cold = ChronicleStore(db_url)
    assert vars(cold.turn(turn.id)) == vars(replayed(cold, turn.id))
    assert vars(cold.turn(turn.id, version=450)) == vars(replayed(cold, turn.id, up_to=450))
