"""Compaction inside one long turn, on both backends: the turn's older steps are replaced by a summary
between model calls, every later request (the next call, a resume, a replay) is built from the events
alike, and the tool_use/tool_result pairs sent stay whole."""

from __future__ import annotations

import asyncio
import json

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.content import ModelResponse, ProviderError, TextBlock, ToolUseBlock, Usage
from chronicle.domain.context import build_context
from chronicle.domain.context_wire import wire_context
from chronicle.runtime.app import queries
from chronicle.runtime.app.replay import replay
from chronicle.runtime.compaction import CompactionSettings, Compactor
from chronicle.runtime.live import Broker
from chronicle.runtime.loop import AgentLoop
from chronicle.runtime.model_call import build_messages
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.toolsets import toolbox_for
from tests.closed_at_end import closed_at_end

BIG = "".join(f"line {i:04d} of a large tool output\n" for i in range(30))  # ~1,000 characters a result


class Crash(BaseException):
    """A process dying mid-turn: nothing in the loop handles it."""


class LongTurnProvider:
    """Reads big.txt `calls` times, then answers; summaries answer "short summary" (or fail)."""

    name = "long"

    def __init__(self, calls: int, *, summary_fails: bool = False, crash_at: int | None = None, refuse_over: int | None = None,
                 report_usage: bool = False) -> None:
        self.calls = calls
        #: Report input tokens as a provider would (the request's characters / 3, as a tokenizer may).
        self.report_usage = report_usage
        self.summary_fails = summary_fails
        self.crash_at = crash_at
        #: Refuse with prompt_too_long a request whose messages are longer than this many characters.
        self.refuse_over = refuse_over
        self.requests: list = []
        self.summaries: list = []

    async def stream(self, request, on_delta):
        if request.auxiliary == "summary":
            self.summaries.append(request)
            if self.summary_fails:
                return ModelResponse(stop_reason="error", error=ProviderError(kind="overloaded", message="summary model overloaded"))
            return ModelResponse(content=[TextBlock(text="short summary")], usage=Usage(input_tokens=900, output_tokens=12))
        if self.refuse_over is not None and len(json.dumps([m.wire() for m in request.messages])) > self.refuse_over:
            self.requests.append(request)
            return ModelResponse(stop_reason="error", error=ProviderError(kind="prompt_too_long", message="prompt is too long"))
        self.requests.append(request)
        done = sum(1 for r in self.requests if r.call_index == request.call_index and r is not request)
        if self.crash_at is not None and request.call_index == self.crash_at and not done:
            raise Crash()
        usage = Usage(input_tokens=len(json.dumps([m.wire() for m in request.messages])) // 3, output_tokens=10) if self.report_usage else Usage()
        if request.call_index < self.calls:
            block = ToolUseBlock(id=f"tu_{request.call_index}", name="read_file", input={"path": "big.txt"})
            return ModelResponse(content=[block], stop_reason="tool_use", usage=usage)
        return ModelResponse(content=[TextBlock(text="done")], usage=usage)


def make_loop(db_url, workspace, provider, settings: CompactionSettings | None = None, store: ChronicleStore | None = None):
    (workspace / "big.txt").write_text(BIG, encoding="utf-8")
    store = store or closed_at_end(ChronicleStore(db_url))
    events: list = []
    broker = Broker()
    broker.subscribe(events.append)
    compactor = Compactor(settings or CompactionSettings(context_window=2000, keep_recent=2))
    loop = AgentLoop(store, provider, toolbox_for(["read_file"]), workspace, broker=broker, compactor=compactor)
    return loop, store, events


def assert_pairs_valid(messages) -> None:
    """Every tool_result answers a tool_use of the message just before it, and every tool_use is answered."""
    wire = [m.wire() for m in messages]
    for index, message in enumerate(wire):
        uses = [b["id"] for b in message["content"] if b["type"] == "tool_use"]
        results = [b["tool_use_id"] for b in message["content"] if b["type"] == "tool_result"]
        if results:
            before = wire[index - 1] if index else {"content": []}
            assert results == [b["id"] for b in before["content"] if b["type"] == "tool_use"], (index, results)
        if uses and index + 1 < len(wire):
            assert [b["tool_use_id"] for b in wire[index + 1]["content"] if b["type"] == "tool_result"] == uses


def ids_in(messages) -> list[str]:
    return [b["id"] for m in messages for b in m.wire()["content"] if b["type"] == "tool_use"]


def test_a_long_turn_compacts_its_older_steps_and_the_next_request_reads_the_summary(db_url, workspace):
    provider = LongTurnProvider(calls=14)
    loop, store, events = make_loop(db_url, workspace, provider)
    session, _ = start_session(store, AgentSpec(tools=("read_file",), aux_model="cheap-model"), "read big.txt many times")
    outcome = asyncio.run(loop.run_next(session.id))
    assert outcome.status == "completed" and outcome.text == "done"
    turn = store.turn(outcome.turn_id)
    assert len(turn.steps) == 15  # the log keeps every step
    first = turn.iteration_compactions[0]
    assert first["summary"] == "short summary" and first["strategy"] == "summary"
    assert first["through_step"] == first["steps_recorded"] - 2  # keep_recent steps stay verbatim
    # The request right after the compaction: the input and the summary, then the kept steps whole.
    after = provider.requests[first["steps_recorded"]]
    head = after.messages[0].wire()["content"]
    assert head[0]["text"] == "read big.txt many times"
    assert head[1]["text"].startswith(f"Summary of the first {first['through_step']} step(s) of this turn") and "short summary" in head[1]["text"]
    assert ids_in(after.messages) == [f"tu_{i}" for i in range(first["through_step"], first["steps_recorded"])]
    assert_pairs_valid(after.messages)
    # Every request after it carries no step the summary stands for.
    for request in provider.requests[first["steps_recorded"]:]:
        assert_pairs_valid(request.messages)
        assert "tu_0" not in ids_in(request.messages)
    # The summary call was sent the steps it replaces, as text (no tool blocks: a request without tools may
    # hold none), and its cost is recorded with the turn.
    summary_request = provider.summaries[0]
    assert summary_request.model == "cheap-model" and provider.requests[-1].model != "cheap-model"  # the auxiliary model
    assert not summary_request.tools and not ids_in(summary_request.messages)
    sent = summary_request.messages[0].wire()["content"][0]["text"]
    assert sent.count('[tool call read_file {"path": "big.txt"}]') == first["through_step"] == sent.count("[tool result read_file: ")
    entries = queries.log(store, session.id)
    compacted = [e for e in entries if e["event"] == "IterationsCompacted"]
    assert compacted and compacted[0]["data"]["usage"]["input_tokens"] == 900 and compacted[0]["data"]["through_step"] == first["through_step"]
    assert compacted[0]["data"]["model"] == "cheap-model"
    spent = {row["model"]: row for row in queries.cost(store, session.id, by="model") if row["scope"] == "self"}
    assert spent["cheap-model"]["calls"] == len(provider.summaries) and spent["cheap-model"]["input_tokens"] == 900 * len(provider.summaries)
    live = [e for e in events if e.type == "compaction"]
    assert live and live[0].turn_id == str(turn.id) and live[0].steps_compacted == first["through_step"]
    # A later turn reads the compacted turn as the loop last sent it.
    assert "short summary" in json.dumps([m.wire() for m in build_context([turn])])
    assert wire_context([turn]) == [m.wire() for m in build_context([turn])]  # what `history` shows, built without pydantic


def test_resume_after_a_crash_mid_turn_rebuilds_the_compacted_context_and_replay_agrees(db_url, workspace):
    provider = LongTurnProvider(calls=12, crash_at=9)
    loop, store, _ = make_loop(db_url, workspace, provider)
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "read it all")
    with pytest.raises(Crash):
        asyncio.run(loop.run_next(session.id))
    turn = store.turn(store.session(session.id).active_turn_id)
    assert turn.status == "running" and turn.iteration_compactions  # compacted before the call that crashed
    sent_before_crash = provider.requests[-1]
    # A new process: a fresh store object and loop, the same provider script.
    again = LongTurnProvider(calls=12)
    loop2, store2, _ = make_loop(db_url, workspace, again, store=closed_at_end(ChronicleStore(db_url)))
    outcome = asyncio.run(loop2.run_next(session.id))
    assert outcome.status == "completed"
    resumed = again.requests[0]
    assert [m.wire() for m in resumed.messages] == [m.wire() for m in sent_before_crash.messages]
    # From events alone, the request of every step is what the loop sent.
    from chronicle.runtime.turn_compaction import prior_messages

    final = store2.turn(outcome.turn_id)
    built = build_messages(prior_messages(store2, store2.session(session.id), final), final)
    assert [m.wire() for m in built[:-1]] == [m.wire() for m in again.requests[-1].messages]  # all but the final answer
    report = asyncio.run(replay(store2, session.id, workspace))
    assert report.identical, report.verdict()
    assert report.model_calls == len(final.steps)


def test_replay_of_a_session_whose_turn_was_compacted_is_identical(db_url, workspace):
    provider = LongTurnProvider(calls=14)
    loop, store, _ = make_loop(db_url, workspace, provider)
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "go")
    assert asyncio.run(loop.run_next(session.id)).status == "completed"
    assert len(store.turn(store.session(session.id).head[-1]).iteration_compactions) >= 2  # compacted, and again later
    report = asyncio.run(replay(store, session.id, workspace))
    assert report.identical, report.verdict()
    assert report.model_calls == 15


def test_a_failed_summary_is_recorded_changes_nothing_and_the_turn_goes_on(db_url, workspace):
    provider = LongTurnProvider(calls=7, summary_fails=True)
    loop, store, events = make_loop(db_url, workspace, provider, CompactionSettings(context_window=2000, critical=10.0, keep_recent=2))
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "go")
    outcome = asyncio.run(loop.run_next(session.id))
    assert outcome.status == "completed"
    turn = store.turn(outcome.turn_id)
    assert not turn.iteration_compactions
    failures = [e for e in queries.log(store, session.id) if e["event"] == "IterationCompactionFailed"]
    assert failures and "summary model overloaded" in failures[0]["data"]["reason"]
    assert ids_in(provider.requests[-1].messages) == [f"tu_{i}" for i in range(7)]  # nothing left out
    assert any(e.type == "error" and e.kind == "compaction" for e in events)


def test_at_the_critical_threshold_the_steps_are_left_out_without_a_model_call(db_url, workspace):
    provider = LongTurnProvider(calls=10, summary_fails=True)
    loop, store, _ = make_loop(db_url, workspace, provider, CompactionSettings(context_window=2000, threshold=0.8, critical=0.8, keep_recent=1))
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "go")
    outcome = asyncio.run(loop.run_next(session.id))
    assert outcome.status == "completed"
    turn = store.turn(outcome.turn_id)
    first = turn.iteration_compactions[0]
    assert first["strategy"] == "truncate" and first["summary"] is None and not provider.summaries
    after = provider.requests[first["steps_recorded"]]
    assert after.messages[0].wire()["content"][1]["text"].startswith(f"[The first {first['through_step']} step(s) of this turn are left out")
    assert ids_in(after.messages) == [f"tu_{first['steps_recorded'] - 1}"]
    assert_pairs_valid(after.messages)
    assert asyncio.run(replay(store, session.id, workspace)).identical


def test_auto_off_never_compacts_a_turn(db_url, workspace):
    provider = LongTurnProvider(calls=10)
    loop, store, _ = make_loop(db_url, workspace, provider, CompactionSettings(context_window=2000, auto=False))
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "go")
    outcome = asyncio.run(loop.run_next(session.id))
    assert outcome.status == "completed"
    assert not store.turn(outcome.turn_id).iteration_compactions and not provider.summaries


def test_prompt_too_long_mid_turn_compacts_the_turns_own_steps_and_retries_once(db_url, workspace):
    # No automatic compaction: the provider's refusal is the only signal.
    provider = LongTurnProvider(calls=10, refuse_over=9000)
    loop, store, _ = make_loop(db_url, workspace, provider, CompactionSettings(auto=False, keep_recent=2))
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "go")
    outcome = asyncio.run(loop.run_next(session.id))
    assert outcome.status == "completed", outcome.reason
    turn = store.turn(outcome.turn_id)
    assert [r["reason"].split(":")[0] for r in turn.retries] == ["prompt_too_long"]
    compaction = turn.iteration_compactions[0]
    assert compaction["summary"] == "short summary" and compaction["through_step"] == compaction["steps_recorded"] - 1
    retried = provider.requests[provider.requests.index(next(r for r in provider.requests if r.call_index == compaction["steps_recorded"])) + 1]
    assert retried.call_index == compaction["steps_recorded"] and ids_in(retried.messages) == [f"tu_{compaction['steps_recorded'] - 1}"]
    assert_pairs_valid(retried.messages)


def test_older_turns_are_compacted_first_when_that_is_enough(db_url, workspace):
    provider = LongTurnProvider(calls=0, report_usage=True)
    loop, store, _ = make_loop(db_url, workspace, provider, CompactionSettings(context_window=2000, keep_recent=5))
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "first " + "x" * 4000)
    asyncio.run(loop.run_next(session.id))
    provider.calls = 3  # the second turn reads big.txt three times
    provider.requests.clear()
    submit_input(store, session.id, "second")
    outcome = asyncio.run(loop.run_next(session.id))
    assert outcome.status == "completed"
    record = store.session(session.id)
    summary, view = record.context_view()
    assert summary == "short summary" and view == [outcome.turn_id]  # the first turn was summarised mid-turn
    assert not store.turn(outcome.turn_id).iteration_compactions  # and that was enough
    assert len(provider.requests[-1].messages[0].wire()["content"][0]["text"]) < 200  # the summary, not the 4,000 characters
    report = asyncio.run(replay(store, session.id, workspace))  # the turns' compaction is placed where it was made
    assert report.identical, report.verdict()


def test_replay_places_a_compaction_before_a_turn_where_it_was_made(db_url, workspace):
    provider = LongTurnProvider(calls=0)
    loop, store, _ = make_loop(db_url, workspace, provider, CompactionSettings(context_window=900, keep_recent=1))
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "first " + "x" * 1500)
    asyncio.run(loop.run_next(session.id))
    for prompt in ("second " + "y" * 1500, "third"):
        submit_input(store, session.id, prompt)
        assert asyncio.run(loop.run_next(session.id)).status == "completed"
    assert store.session(session.id).context_view()[0] == "short summary"  # compacted before the third turn
    # The provider named no model in its answer: the summary records the one asked (here the main one).
    assert [e["data"]["model"] for e in queries.log(store, session.id) if e["event"] == "Compacted"] == [AgentSpec().model]
    report = asyncio.run(replay(store, session.id, workspace))
    assert report.identical, report.verdict()


def test_the_request_context_keeps_the_size_of_what_it_sends(db_url, workspace):
    from chronicle.runtime.request_context import RequestContext, canonical

    provider = LongTurnProvider(calls=14)
    loop, store, _ = make_loop(db_url, workspace, provider)
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "go")
    turn = store.turn(asyncio.run(loop.run_next(session.id)).turn_id)
    context = RequestContext([])
    assert context.size(turn) == sum(len(canonical(m.wire())) for m in context.messages(turn))
