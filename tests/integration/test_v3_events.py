"""Schema v3: each fact stored once, as small as it can be, and read back whole.

A read-only tool's run is one event (its Started would be committed with its end anyway); a
tool that must not run twice still commits Started first. A response is stored without its
defaults and its request reference without never-read hashes, yet the turn reads the full
response. The session's TurnEnded does not repeat the turn's outcome. Live events derived from
the log still show a start for every tool that ran.
"""

from __future__ import annotations

from uuid import UUID

from chronicle.domain.ids import tool_call_id
from chronicle.runtime.app.queries import log
from chronicle.runtime.live import ToolEnd, ToolStart
from chronicle.runtime.live_from_log import LiveFromLog
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, response, text, tool_use, write_script

SCRIPT = [
    response(text("Reading, then writing."), tool_use("r1", "read_file", path="hello.txt")),
    response(tool_use("w1", "write_file", path="notes.txt", content="noted\n")),
    response(text("Done.")),
]


def run_once(db_url: str, workspace, tmp_path) -> tuple[ChronicleStore, UUID]:  # type: ignore[no-untyped-def]
    script = write_script(tmp_path / "s.json", SCRIPT)
    ran = cli("run", "read and write", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", db=db_url)
    assert ran.returncode == 0, ran.stderr
    store = ChronicleStore(db_url)
    return store, store.session_ids()[-1]


def test_a_tool_that_may_run_again_records_its_run_in_one_event_and_one_that_must_not_commits_its_start(db_url, workspace, tmp_path):
    store, sid = run_once(db_url, workspace, tmp_path)
    turn = store.turn(store.session(sid).turns[0])
    read = store.tool_call(tool_call_id(turn.id, 0, "r1"))
    write = store.tool_call(tool_call_id(turn.id, 1, "w1"))
    kinds = {c.name: [type(e).__name__ for e in store.events.get(c.id)] for c in (read, write)}
    assert kinds == {"read_file": ["Requested", "Completed"], "write_file": ["Requested", "Started", "Completed"]}
    assert [list(store.events.get(c.id))[-1].attempt for c in (read, write)] == [1, None]
    assert (read.attempts, write.attempts) == (1, 1) and turn.result_of(read).content.startswith("hello world")
    # the output is stored once, by the turn: not on the call's Completed, not twice in the turn
    assert read.output is None and write.output is None
    stored = [e for e in store.events.get(turn.id) if type(e).__name__ in ("ToolResultsKept", "ToolResultsRecorded")]
    assert [(type(e).__name__, e.step, [b.get("kept", False) for b in e.blocks]) for e in stored] == [
        ("ToolResultsRecorded", 0, [False]), ("ToolResultsKept", 1, [False]), ("ToolResultsRecorded", 1, [True])]
    assert write.effects and write.effects[0]["path"] == "notes.txt"


def test_responses_are_stored_without_defaults_and_read_back_whole(db_url, workspace, tmp_path):
    store, sid = run_once(db_url, workspace, tmp_path)
    turn = store.turn(store.session(sid).turns[0])
    stored = [e for e in store.events.get(turn.id) if type(e).__name__ == "ModelResponded"]
    assert len(stored) == 3
    assert all(not {"error", "id", "stop_sequence", "stop_details"} & set(e.response) for e in stored)
    assert all(set(e.request_delta) == {"model", "max_tokens", "message_count"} for e in stored)
    full = turn.steps[0]["response"]
    assert full["error"] is None and full["id"] == "" and full["stop_details"] is None
    assert full["usage"]["cache_read_input_tokens"] == 0 and full["usage"]["input_tokens"] == 10
    assert turn.last_response is not None and turn.last_response.text == "Done."
    ended = [e for e in store.events.get(sid) if type(e).__name__ == "TurnEnded"]
    assert len(ended) == 1 and not hasattr(ended[0], "status")


def test_live_events_from_the_log_start_every_tool_that_ran_before_it_ends(db_url, workspace, tmp_path):
    store, sid = run_once(db_url, workspace, tmp_path)
    derived = [p.event for p in LiveFromLog(str(sid), "main").feed(log(store, sid))]
    tools = [(type(e).__name__, e.name) for e in derived if isinstance(e, (ToolStart, ToolEnd))]
    assert tools == [("ToolStart", "read_file"), ("ToolEnd", "read_file"), ("ToolStart", "write_file"), ("ToolEnd", "write_file")]
    assert next(e for e in derived if isinstance(e, ToolEnd)).output.startswith("hello world")


def test_a_store_with_compressed_states_verifies_its_hash_chain(db_url, workspace, tmp_path):
    store, _ = run_once(db_url, workspace, tmp_path)
    compressed = [e for e in store.recorder.select_events(store.session_ids()[-1]) if not e.state.startswith(b"{")]
    assert compressed, "the session's Started event is large enough to be stored compressed"
    verified = cli("verify", db=db_url)
    assert verified.returncode == 0, verified.stdout + verified.stderr
