"""`log` reads a session's events once each: the sessions' and turns' first, then the tool calls
they name, merged in log order; read in steps (`--follow`, the server's stream) it gives what a
single read gives."""

from __future__ import annotations

from chronicle.runtime.app.queries import LogTail, log
from tests.helpers import response, text, tool_use

from .loop_harness import Harness


def _harness(db_url, workspace, tmp_path) -> Harness:  # type: ignore[no-untyped-def]
    return Harness(db_url, workspace, tmp_path, [
        [response(tool_use("t1", "read_file", path="hello.txt"), tool_use("t2", "list_dir", path=".")), response(text("read"))],
        [response(tool_use("t3", "read_file", path="hello.txt")), response(text("again"))],
    ])


def test_log_holds_every_event_of_the_session_its_turns_and_calls_in_log_order(db_url, workspace, tmp_path):
    h = _harness(db_url, workspace, tmp_path)
    h.run("first")
    h.run("second")
    entries = log(h.store, h.session_id)
    expected = [position for position, _ in h.store.events_with_positions(h.store.aggregate_ids_of(h.store.session(h.session_id)))]
    assert [e["position"] for e in entries] == expected
    kinds = {e["aggregate"] for e in entries}
    assert kinds == {"session", "turn", "tool_call"}
    completed = [e for e in entries if e["aggregate"] == "tool_call" and e["event"] == "Completed"]
    assert len(completed) == 3 and all(e["data"]["output"].startswith(("hello world", "hello.txt")) for e in completed)


def test_a_log_read_in_steps_gives_what_one_read_gives(db_url, workspace, tmp_path):
    h = _harness(db_url, workspace, tmp_path)
    h.run("first")
    tail = LogTail(h.store, h.session_id)
    first = tail.read()
    assert first and tail.read() == []  # nothing new: nothing returned
    h.run("second")  # a new turn, and calls only it names
    second = tail.read()
    assert second and min(e["position"] for e in second) > max(e["position"] for e in first)
    assert any(e["aggregate"] == "tool_call" for e in second)
    assert first + second == log(h.store, h.session_id)
