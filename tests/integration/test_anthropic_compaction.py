"""Compaction summaries through the real `anthropic` SDK against the loopback Messages API, which
refuses tool_use/tool_result blocks in a request without tools as the real API does: a session that
used tools is summarised before a turn and inside one, the summary is recorded with the model that
answered, and replay agrees (both backends)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.app import queries
from chronicle.runtime.app.replay import replay
from chronicle.runtime.compaction import CompactionSettings, Compactor
from chronicle.runtime.live import Broker
from chronicle.runtime.loop import AgentLoop
from chronicle.runtime.providers.anthropic_provider import AnthropicProvider
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.toolsets import toolbox_for
from tests.sse_server import HttpError, reply, sse  # noqa: F401

KEY = "sk-ant-test-0123456789-secret"
MAIN, AUX, AUX_ANSWERED = "claude-sonnet-4-6", "claude-haiku-4-5", "claude-haiku-4-5-20251001"
NEAR_FULL = {"input_tokens": 8_500, "output_tokens": 20}  # of a 10,000-token window: past 0.80, short of 0.95
SMALL = {"input_tokens": 50, "output_tokens": 10}


def read(id_: str, path: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": "read_file", "input": {"path": path}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def summary_reply(value: str) -> Any:
    return reply([text(value)], usage={"input_tokens": 700, "output_tokens": 40}, model=AUX_ANSWERED)


def setup(db_url: str, workspace: Path, server: Any) -> tuple[AgentLoop, ChronicleStore, list[Any], AgentSpec]:
    (workspace / "notes.txt").write_text("the build uses make; tests run with pytest\n", encoding="utf-8")
    store = ChronicleStore(db_url)
    events: list[Any] = []
    broker = Broker()
    broker.subscribe(events.append)
    compactor = Compactor(CompactionSettings(context_window=10_000, keep_recent=1))
    provider = AnthropicProvider(MAIN, api_key=KEY, base_url=server.url)
    loop = AgentLoop(store, provider, toolbox_for(["read_file"]), workspace, broker=broker, compactor=compactor)
    spec = AgentSpec(provider="anthropic", model=MAIN, tools=("read_file",), aux_model=AUX, workspace=str(workspace))
    return loop, store, events, spec


def summary_requests(server: Any) -> list[Any]:
    return [r for r in server.requests if "Summarise the conversation above" in str(r.body["messages"])]


def assert_plain_text_summary_request(request: Any, *expected: str) -> None:
    """Sent as the real API takes it: the auxiliary model, no tools, one user message of text naming the tool calls."""
    body = request.body
    assert body["model"] == AUX and not body.get("tools")
    assert [m["role"] for m in body["messages"]] == ["user"]
    assert {b["type"] for b in body["messages"][0]["content"]} == {"text"}
    sent = body["messages"][0]["content"][0]["text"]
    for part in expected:
        assert part in sent, (part, sent)


def test_a_session_that_used_tools_is_summarised_before_a_turn(db_url, workspace, sse):
    loop, store, events, spec = setup(db_url, workspace, sse)
    sse.script(
        reply([text("Reading."), read("tu_1", "notes.txt")], usage=SMALL, model=MAIN),
        reply([text("It says make and pytest.")], usage=SMALL, model=MAIN),
        reply([text("Noted.")], usage=NEAR_FULL, model=MAIN),  # the next request would be near the window
        summary_reply("The user asked about notes.txt: make builds, pytest tests."),
        reply([text("Yes: make.")], usage=SMALL, model=MAIN),
    )
    session, _ = start_session(store, spec, "what does notes.txt say?")
    assert asyncio.run(loop.run_next(session.id)).status == "completed"
    for prompt in ("thanks", "so how do I build?"):
        submit_input(store, session.id, prompt)
        assert asyncio.run(loop.run_next(session.id)).status == "completed"

    assert not sse.refused, [r.body for r in sse.refused]
    log = queries.log(store, session.id)
    assert not [e for e in log if e["event"] == "CompactionFailed"], [e["data"] for e in log if e["event"] == "CompactionFailed"]
    compacted = [e["data"] for e in log if e["event"] == "Compacted"]
    assert len(compacted) == 1 and compacted[0]["summary"] == "The user asked about notes.txt: make builds, pytest tests."
    assert compacted[0]["strategy"] == "summary" and compacted[0]["model"] == AUX_ANSWERED  # what answered, not what was asked
    [request] = summary_requests(sse)
    assert_plain_text_summary_request(request, "what does notes.txt say?", '[tool call read_file {"path": "notes.txt"}]',
                                      "[tool result read_file: ", "make; tests run with pytest", "It says make and pytest.")
    # The main conversation still sends the tool blocks as they were (with its tools), then reads the summary.
    assert sse.requests[1].body["tools"] and [b["type"] for b in sse.requests[1].body["messages"][2]["content"]] == ["tool_result"]
    last = sse.requests[-1].body["messages"]
    assert "The user asked about notes.txt" in str(last[0]) and "tool_use" not in str(last)
    report = asyncio.run(replay(store, session.id, workspace))
    assert report.identical, report.verdict()


def test_a_long_turn_that_used_tools_summarises_its_own_older_steps(db_url, workspace, sse):
    loop, store, events, spec = setup(db_url, workspace, sse)
    sse.script(
        reply([text("First look."), read("tu_1", "notes.txt")], usage=SMALL, model=MAIN),
        reply([read("tu_2", "missing.txt")], usage=SMALL, model=MAIN),
        reply([read("tu_3", "notes.txt")], usage=NEAR_FULL, model=MAIN),  # the next request would be near the window
        summary_reply("Read notes.txt (make, pytest); missing.txt does not exist."),
        reply([text("Done: make builds it.")], usage=SMALL, model=MAIN),
    )
    session, _ = start_session(store, spec, "find out how to build")
    outcome = asyncio.run(loop.run_next(session.id))
    assert outcome.status == "completed" and outcome.text == "Done: make builds it."

    assert not sse.refused, [r.body for r in sse.refused]
    log = queries.log(store, session.id)
    assert not [e for e in log if e["event"] == "IterationCompactionFailed"], [e["data"] for e in log if e["event"] == "IterationCompactionFailed"]
    [compacted] = [e["data"] for e in log if e["event"] == "IterationsCompacted"]
    assert compacted["summary"] == "Read notes.txt (make, pytest); missing.txt does not exist."
    assert compacted["through_step"] == 2 and compacted["model"] == AUX_ANSWERED
    [request] = summary_requests(sse)
    assert_plain_text_summary_request(request, "find out how to build", '[tool call read_file {"path": "missing.txt"}]',
                                      "[tool error read_file: ", "First look.")
    assert "tu_3" not in str(request.body)  # the step kept verbatim is not summarised
    after = sse.requests[-1].body
    assert after["tools"] and "Read notes.txt (make, pytest)" in str(after["messages"][0])
    assert [b["id"] for m in after["messages"] for b in m["content"] if b["type"] == "tool_use"] == ["tu_3"]
    report = asyncio.run(replay(store, session.id, workspace))
    assert report.identical, report.verdict()


@pytest.mark.parametrize("message", [
    "prompt is too long: 212000 tokens > 200000 maximum",
    # The API's other wording when the input plus max_tokens overflow the window (continuedev/continue#6080).
    "input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, decrease input length or `max_tokens` and try again",
], ids=["prompt-is-too-long", "exceed-context-limit"])
def test_a_context_limit_400_compacts_the_older_turns_and_retries_once(db_url, workspace, sse, message):
    loop, store, events, spec = setup(db_url, workspace, sse)
    sse.script(
        reply([text("First answer.")], usage=SMALL, model=MAIN),
        HttpError(400, "invalid_request_error", message),
        summary_reply("The user asked a first question; it was answered."),
        reply([text("Second answer.")], usage=SMALL, model=MAIN),
    )
    session, _ = start_session(store, spec, "first question")
    assert asyncio.run(loop.run_next(session.id)).status == "completed"
    submit_input(store, session.id, "second question")
    outcome = asyncio.run(loop.run_next(session.id))
    assert outcome.status == "completed" and outcome.text == "Second answer."
    log = queries.log(store, session.id)
    [retried] = [e["data"] for e in log if e["event"] == "ModelCallRetried"]
    assert retried["reason"].startswith("prompt_too_long")
    assert "The user asked a first question" in str(sse.requests[-1].body["messages"])


FULL = "model_context_window_exceeded"


def second_turn_window_full(db_url: str, workspace: Path, server: Any, *second: Any) -> tuple[Any, ChronicleStore, Any]:
    """A first turn answered, then a second whose replies are `second` (the first of them filled the window)."""
    loop, store, events, spec = setup(db_url, workspace, server)
    server.script(reply([text("First answer.")], usage=SMALL, model=MAIN), *second)
    session, _ = start_session(store, spec, "first question")
    assert asyncio.run(loop.run_next(session.id)).status == "completed"
    submit_input(store, session.id, "second question")
    return asyncio.run(loop.run_next(session.id)), store, session


def test_a_tool_use_that_fills_the_context_window_compacts_the_older_turns_and_goes_on_once(db_url, workspace, sse):
    outcome, store, session = second_turn_window_full(
        db_url, workspace, sse,
        reply([text("Reading."), read("tu_1", "notes.txt")], usage=NEAR_FULL, model=MAIN, stop_reason=FULL),
        summary_reply("The user asked a first question; it was answered."),
        reply([text("Second answer.")], usage=SMALL, model=MAIN),
    )
    assert outcome.status == "completed" and outcome.text == "Second answer."
    assert len(sse.requests) == 4 and len(summary_requests(sse)) == 1
    log = queries.log(store, session.id)
    [retried] = [e["data"] for e in log if e["event"] == "ModelCallRetried"]
    assert retried["reason"].startswith("context_window_full")
    turn = store.turn(outcome.turn_id)
    [call] = store.tool_calls_of(turn)
    assert call.status == "failed" and FULL in turn.steps[0]["results"][0]["content"]  # never run, and the model is told why
    after = sse.requests[-1].body["messages"]
    assert "The user asked a first question" in str(after) and "First answer." not in str(after)


def test_a_context_window_still_full_after_compacting_fails_the_turn_instead_of_calling_again(db_url, workspace, sse):
    full = reply([text("Reading."), read("tu_1", "notes.txt")], usage=NEAR_FULL, model=MAIN, stop_reason=FULL)
    again = reply([text("Reading again."), read("tu_2", "notes.txt")], usage=NEAR_FULL, model=MAIN, stop_reason=FULL)
    outcome, store, session = second_turn_window_full(
        db_url, workspace, sse, full, summary_reply("The first question was answered."), again,
        reply([text("never asked")], usage=SMALL, model=MAIN),
    )
    assert outcome.status == "failed", outcome
    assert FULL in outcome.reason and "even after compacting" in outcome.reason and "chronicle compact" in outcome.reason
    assert "larger context window" in outcome.reason and "read_file" in outcome.reason
    assert len(sse.requests) == 4 and len(summary_requests(sse)) == 1  # one compaction, one call after it: no more
    turn = store.turn(outcome.turn_id)
    assert turn.error == {"kind": "context_window_full", "tool_use_ids": ["tu_2"]}
    assert [e["event"] for e in queries.log(store, session.id)].count("ModelCallRetried") == 1


def test_a_full_context_window_with_nothing_to_compact_fails_the_turn_at_once(db_url, workspace, sse):
    loop, store, events, spec = setup(db_url, workspace, sse)
    sse.script(
        reply([text("Reading."), read("tu_1", "notes.txt")], usage=NEAR_FULL, model=MAIN, stop_reason=FULL),
        reply([text("never asked")], usage=SMALL, model=MAIN),
    )
    session, _ = start_session(store, spec, "only question")
    outcome = asyncio.run(loop.run_next(session.id))
    assert outcome.status == "failed" and "nothing is left to compact" in outcome.reason and FULL in outcome.reason
    assert len(sse.requests) == 1
    assert any(getattr(e, "kind", None) == "context_window_full" for e in events)  # said live too


def test_a_text_answer_cut_by_the_context_window_compacts_the_older_turns_so_the_next_turn_fits(db_url, workspace, sse):
    outcome, store, session = second_turn_window_full(
        db_url, workspace, sse,
        reply([text("The second answer is long and")], usage=NEAR_FULL, model=MAIN, stop_reason=FULL),
        summary_reply("The user asked a first question; it was answered."),
    )
    assert outcome.status == "completed" and outcome.text == "The second answer is long and"
    assert FULL in outcome.reason and "compacted to make room" in outcome.reason
    assert len(sse.requests) == 3 and len(summary_requests(sse)) == 1
    assert store.session(session.id).compaction
