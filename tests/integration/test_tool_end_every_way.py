"""Every way a tool call ends shows a `tool_end`, in the live stream (`run --json`, the library's
stream, chat) and in the stream the server derives from the log, with the same fields in both.

A call a person denies never starts, so nothing else in the stream says it is over; a client
that drew the `approval_needed` would otherwise wait for it forever.
"""

from __future__ import annotations

import asyncio

from chronicle.runtime.app import approvals
from chronicle.runtime.app.queries import log
from chronicle.runtime.live_from_log import LiveFromLog
from tests.helpers import response, text, tool_use

from .loop_harness import Harness


def ends(events):
    return [(e.tool_use_id, e.name, e.status, e.output, e.is_error) for e in events if e.type == "tool_end"]


def derived_ends(h):
    return ends(p.event for p in LiveFromLog(str(h.session_id), "main").feed(log(h.store, h.session_id)))


def test_a_call_a_person_denies_ends_with_a_tool_end_as_the_log_derived_stream_shows_it(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("a", "bash", command="echo no"), tool_use("b", "list_dir", path=".")),
        response(text("understood")),
    ])
    asked = []

    async def person(call):
        asked.append(call.name)
        return "deny"

    h.loop.approver = person
    assert h.run("try").status == "completed"
    assert asked == ["bash"]
    live = ends(h.events)
    assert [(u, s) for u, _, s, _, _ in live] == [("a", "denied"), ("b", "completed")]
    assert live[0][3] == "denied: denied by the user" and live[0][4] is True
    assert live == derived_ends(h)


def test_a_call_denied_while_the_turn_waited_ends_in_the_stream_that_resumes_the_turn(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("a", "bash", command="echo no")),
        response(text("understood")),
    ])
    assert h.run("try").status == "awaiting_approval"
    assert ends(h.events) == []
    approvals.deny(h.store, h.session_id, reason="not today")
    h.events.clear()
    outcome = asyncio.run(h.loop.run_next(h.session_id))
    assert outcome is not None and outcome.status == "completed"
    assert ends(h.events) == [("a", "bash", "denied", "denied: not today", True)]
    assert ends(h.events) == derived_ends(h)


def test_calls_of_a_response_cut_at_max_tokens_end_in_the_stream_though_they_never_ran(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("a", "write_file", path="half.txt", content="trunc"), stop="max_tokens"),
        response(text("I will be briefer.")),
    ])
    assert h.run("write").status == "completed"
    live = ends(h.events)
    assert [(u, s, err) for u, _, s, _, err in live] == [("a", "failed", True)] and "max_tokens" in live[0][3]
    assert live == derived_ends(h)


def test_skipped_and_policy_denied_calls_end_the_same_in_both_streams(db_url, workspace, tmp_path):
    from chronicle.domain.approval_policy import ApprovalPolicy

    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("a", "bash", command="echo no"), tool_use("b", "read_file", path="nope.txt")),
        response(text("done")),
    ])
    h.spec = h.spec.model_copy(update={"approvals": ApprovalPolicy(policy="deny", source="test")})
    assert h.run("try").status == "completed"
    live = ends(h.events)
    assert [(u, s) for u, _, s, _, _ in live] == [("a", "denied"), ("b", "failed")]
    assert live == derived_ends(h)
