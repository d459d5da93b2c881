"""The worker's index of sessions with work agrees with loading every session, as the log moves."""

from __future__ import annotations

import asyncio

from chronicle.runtime.app.resume import census
from chronicle.runtime.session_work import pending_approvals
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.work_index import WorkIndex
from tests.helpers import response, text, tool_use

from .loop_harness import Harness


def test_the_index_follows_queued_inputs_finished_turns_approvals_and_new_sessions(db_url, workspace, tmp_path):
    shell = [response(tool_use("tu_1", "bash", command="echo hi")), response(text("ran it"))]
    h = Harness(db_url, workspace, tmp_path, [[response(text("one"))], shell, [response(text("three"))]], auto_approve=False)
    store = h.store
    index = WorkIndex(store)

    def agree() -> list:
        found = index.sessions()
        assert sorted(found) == sorted(census(store).needing_work)
        return found

    assert agree() == []
    assert h.run("first").status == "completed"
    sid = h.session_id
    assert agree() == []
    submit_input(store, sid, "second")
    assert agree() == [sid]
    assert asyncio.run(h.loop.run_next(sid)).status == "awaiting_approval"
    assert agree() == []  # waits for a person
    (call,) = pending_approvals(store, store.session(sid))
    call.approve(h.loop.clock.now(), by="user")
    store.save(call)
    assert agree() == [sid]  # the approval is a ToolCall event: the index rechecks its session
    assert asyncio.run(h.loop.run_next(sid)).status == "completed"
    assert agree() == []

    new, _ = start_session(store, h.spec, "a new session")
    assert agree() == [new.id]
    assert WorkIndex(store).sessions() == [new.id]  # a fresh scan agrees with the followed index
    store.close()


def test_a_store_whose_scan_is_slow_is_rescanned_less_often_not_more_of_the_time(db_url, workspace, tmp_path):
    """The full rescan is a safety net: at most SCAN_SHARE of a worker's time. With a 1 ms rescan interval every poll
    would rescan every session; the interval grows to a hundred times what the scan took instead."""
    h = Harness(db_url, workspace, tmp_path, [[response(text("one"))]])
    assert h.run("first").status == "completed"
    index = WorkIndex(h.store, rescan_s=0.001)
    index.sessions()
    scanned = index.scanned_at
    index.sessions()
    assert index.scanned_at == scanned, "rescanned at once: the scan's own cost did not lengthen the interval"
    assert index.rescan_after > 0.001
    h.store.close()
