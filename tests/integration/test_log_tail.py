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


def test_a_log_read_in_steps_reads_each_board_index_entry_once_however_often_other_sessions_move_the_head(
        db_url, workspace, tmp_path, monkeypatch):
    """`log --follow` polls `read()`; any write to the store moves the log's head. The session's board index
    used to be read whole at every such poll: here each of its entries is decoded once, in the read that
    first reaches it. Counted where every stored event is decoded (the store's mapper), whatever reads it,
    while the log reads (posting a task reads its board index's last entry too: that is the poster's)."""
    from collections import Counter
    from uuid import uuid4

    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.domain.ids import board_index_id
    from chronicle.runtime.clock import SYSTEM_CLOCK
    from chronicle.runtime.sessions import start_session
    from chronicle.runtime.task_board import post_task, task_row

    class board:  # noqa: N801 - the board's own write: `tasks add` refuses a session no agent could claim from
        @staticmethod
        def add(store, sid, text):  # type: ignore[no-untyped-def]
            return task_row(post_task(store, store.session(sid), text, "", uuid4(), SYSTEM_CLOCK.now()))

    h = _harness(db_url, workspace, tmp_path)
    h.run("first")
    other, _ = start_session(h.store, AgentSpec(name="main"), "someone else's work")
    first = board.add(h.store, h.session_id, "count the widgets")
    decoded: Counter = Counter()
    real = h.store.mapper.to_domain_event
    tail = LogTail(h.store, h.session_id)

    def counted(stored):  # type: ignore[no-untyped-def]
        decoded[stored.originator_id] += 1
        return real(stored)

    def read() -> list:
        monkeypatch.setattr(h.store.mapper, "to_domain_event", counted)
        try:
            return tail.read()
        finally:
            monkeypatch.setattr(h.store.mapper, "to_domain_event", real)

    shown = read()
    assert [e["aggregate_id"] for e in shown if e["aggregate"] == "task"] == [first["task_id"]]
    for i in range(6):  # the head moves, nothing of this session's changes
        board.add(h.store, other.id, f"other work {i}")
        assert read() == []
    second = board.add(h.store, h.session_id, "recount them")
    [posted] = read()
    assert (posted["aggregate_id"], posted["event"]) == (second["task_id"], "Posted")
    assert decoded[board_index_id(h.session_id)] == 2, "each entry of the board index read once"
    assert decoded[board_index_id(other.id)] == 0, "another session's board is not this log's"
    assert shown + [posted] == log(h.store, h.session_id)
