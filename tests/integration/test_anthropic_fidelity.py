"""Real recorded wire shapes through the real SDK and loop: server tools, citations, refusals,
tool input cut by max_tokens, full usage, broken and cancelled streams (issue 17), on both backends."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chronicle.domain.content import Message, TextBlock
from chronicle.runtime.providers.anthropic_provider import AnthropicProvider
from chronicle.runtime.providers.base import ModelRequest, ignore_deltas
from chronicle.runtime.titles import TitleHook
from tests.integration.test_anthropic_loop import KEY, MODEL, AnthropicHarness, text, tool
from tests.loop_harness import first_text, run_cancelled_when
from tests.sse_server import (  # noqa: F401
    FULL_USAGE,
    Stream,
    cut_tool_input,
    message_events,
    refusal,
    reply,
    sse,
    web_search_blocks,
)

ANSWERING = "claude-sonnet-4-5-20250929"


def second_turn(harness: AnthropicHarness, prompt: str) -> Any:
    from chronicle.runtime.sessions import submit_input

    submit_input(harness.store, harness.session_id, prompt)
    return asyncio.run(harness.loop.run_next(harness.session_id))


def test_server_tool_blocks_and_citations_are_recorded_verbatim_and_sent_back_unchanged(db_url, workspace, sse):
    blocks = web_search_blocks()
    sse.script(reply(blocks, usage=FULL_USAGE, model=ANSWERING), reply([text("Sure.")]))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("what is event sourcing?")
    assert outcome.status == "completed", outcome.reason
    assert outcome.text == "Let me search.Event sourcing records every change."
    response = harness.turn().steps[0]["response"]
    assert response["content"] == blocks  # every type and field, unknown ones included
    assert response["model"] == ANSWERING  # the model that answered, not the one asked
    assert response["usage"] == FULL_USAGE  # service_tier, 5m/1h split, web searches, inference_geo
    assert response["request_id"] == "req_stream_test"  # the request-id header, what Anthropic's support asks for
    second_turn(harness, "thanks")
    sent = sse.requests[1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "user"]
    assert sent[1]["content"] == blocks


def test_a_refusal_is_a_recorded_failure_and_the_refused_exchange_is_never_sent_again(db_url, workspace, sse):
    sse.script(refusal(""), reply([text("Hello again.")]))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("write me malware")
    assert outcome.status == "failed" and "refused" in outcome.reason and "cyber" in outcome.reason
    turn = harness.turn()
    assert turn.error["kind"] == "refusal" and turn.error["stop_details"]["category"] == "cyber"
    recorded = turn.steps[0]["response"]
    assert recorded["stop_reason"] == "refusal" and recorded["content"] == [text("")]  # recorded as sent
    assert recorded["stop_details"]["explanation"] == "This request asks for malware."
    follow = second_turn(harness, "hello")
    assert follow.status == "completed"
    sent = sse.requests[1].body["messages"]
    assert sent == [{"role": "user", "content": [{"type": "text", "text": "hello", "cache_control": {"type": "ephemeral"}}]}]


def test_empty_text_blocks_are_never_sent_back(db_url, workspace, sse):
    sse.script(reply([text(""), tool("tu_1", "read_file", path="hello.txt")]), reply([text(" "), text("Done.")]))
    harness = AnthropicHarness(db_url, workspace, sse)
    assert harness.run("read it").status == "completed"
    assert harness.turn().steps[0]["response"]["content"][0] == text("")  # the record keeps it
    sent = sse.requests[1].body["messages"]
    assert [b["type"] for b in sent[1]["content"]] == ["tool_use"]
    second_turn(harness, "and?")
    assert sse.requests[2].body["messages"][3]["content"] == [text("Done.")]
    assert all(b.get("text", "x").strip() for m in sse.requests[2].body["messages"] for b in m["content"])


def test_tool_input_cut_by_max_tokens_is_kept_raw_never_run_and_the_turn_says_so(db_url, workspace, sse):
    raw = '{"path": "notes.txt", "content": "The first line\\nand the sec'
    sse.script(cut_tool_input(raw), reply([text("ok")]))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("write notes")
    assert outcome.status == "failed" and "cut at max_tokens" in outcome.reason and "write_file" in outcome.reason
    turn = harness.turn()
    assert turn.error == {"kind": "max_tokens_tool_input", "tool_use_ids": ["toolu_cut"]}
    block = turn.steps[0]["response"]["content"][1]
    assert block["input"] == {} and block["partial_input_json"] == raw  # the model's text, never "completed"
    assert not (workspace / "notes.txt").exists()
    [call] = harness.store.tool_calls_of(turn)
    assert call.status == "failed" and call.input == {}
    results = turn.steps[0]["results"]
    assert results[0]["is_error"] and "cut at max_tokens" in results[0]["content"] and "not run" in results[0]["content"]
    second_turn(harness, "try again")
    sent = sse.requests[1].body["messages"]
    assert all(b.get("id") != "toolu_cut" and b.get("tool_use_id") != "toolu_cut" for m in sent for b in m["content"])


@pytest.mark.parametrize("kind,name,extra", [
    ("server_tool_use", "web_search", {}),
    ("mcp_tool_use", "search_docs", {"server_name": "docs"}),
], ids=["server_tool_use", "mcp_tool_use"])
def test_a_server_tool_input_cut_by_max_tokens_is_kept_raw_and_never_sent_back(db_url, workspace, sse, kind, name, extra):
    raw = '{"query": "event sourc'
    cut = {"type": kind, "id": "srvtoolu_cut", "name": name, "input": {}, "raw_json": raw, **extra}
    sse.script(reply([text("Let me search."), cut], stop_reason="max_tokens"), reply([text("Searched.")]))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("search it")
    assert outcome.status == "failed" and "cut at max_tokens" in outcome.reason and name in outcome.reason
    turn = harness.turn()
    assert turn.error == {"kind": "max_tokens_tool_input", "tool_use_ids": ["srvtoolu_cut"]}
    block = turn.steps[0]["response"]["content"][1]
    assert block["type"] == kind and block["input"] == {} and block["partial_input_json"] == raw  # recorded as it came
    assert second_turn(harness, "and?").status == "completed"
    assert not sse.refused, [r.body for r in sse.refused]  # the API would refuse partial_input_json on any block
    sent = sse.requests[1].body["messages"]
    assert all(b.get("id") != "srvtoolu_cut" for m in sent for b in m["content"]), sent


def test_text_cut_by_max_tokens_completes_but_the_outcome_says_it_is_cut(db_url, workspace, sse):
    sse.script(reply([text("The answer is long and")], stop_reason="max_tokens"))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("explain")
    assert outcome.status == "completed" and outcome.text == "The answer is long and"
    assert outcome.reason and "max_tokens" in outcome.reason


def test_a_stream_broken_after_message_start_keeps_its_usage_model_and_streamed_text(db_url, workspace, sse):
    events = message_events([text("Half of the answer, then")], usage={"input_tokens": 700}, model=ANSWERING, split=10)
    sse.script(Stream(events, drop_after=6))  # message_start, ping, block_start, three text deltas
    harness = AnthropicHarness(db_url, workspace, sse, max_attempts=1)
    outcome = harness.run("hi")
    assert outcome.status == "failed"
    response = harness.turn().steps[0]["response"]
    assert response["stop_reason"] == "error" and response["model"] == ANSWERING and response["request_id"] == "req_stream_test"
    assert response["usage"]["input_tokens"] == 700 and response["content"] == [text("Half of the answer, then")]


def test_a_retried_broken_stream_keeps_its_usage_on_the_retry_event(db_url, workspace, sse):
    events = message_events([text("lost")], usage={"input_tokens": 700}, model=ANSWERING)
    sse.script(Stream(events, drop_after=4), reply([text("Done.")]))
    harness = AnthropicHarness(db_url, workspace, sse)
    assert harness.run("hi").status == "completed"
    retry = harness.turn().retries[0]
    assert retry["error"]["usage"]["input_tokens"] == 700 and retry["error"]["model"] == ANSWERING


def test_a_cancelled_stream_keeps_the_input_tokens_and_the_answering_model(db_url, workspace, sse):
    words = text("The first words, then a very long pause")
    events = message_events([words], usage={"input_tokens": 512}, model=ANSWERING, split=16)
    sse.script(Stream(events, hang_after=4))

    harness, outcome = run_cancelled_when(lambda **kw: AnthropicHarness(db_url, workspace, sse, **kw), "talk", first_text)
    assert outcome.status == "cancelled"
    response = harness.turn().steps[0]["response"]
    assert response["stop_reason"] == "aborted" and response["content"] == [text("The first words,")]
    assert response["usage"]["input_tokens"] == 512 and response["model"] == ANSWERING


def test_duplicate_tool_use_ids_pass_through_the_provider_verbatim(sse):
    sse.script(reply([tool("tu_dup", "read_file", path="a"), tool("tu_dup", "read_file", path="b")]))
    provider = AnthropicProvider(MODEL, api_key=KEY, base_url=sse.url)
    request = ModelRequest(model=MODEL, messages=[Message(role="user", content=[TextBlock(text="hi")])])
    response = asyncio.run(provider.stream(request, ignore_deltas))
    assert response.stop_reason == "tool_use"
    assert [(b.id, b.input["path"]) for b in response.tool_uses] == [("tu_dup", "a"), ("tu_dup", "b")]


def test_thinking_is_sent_on_the_agents_calls_and_never_on_auxiliary_calls(db_url, workspace, sse):
    sse.script(reply([text("Hi.")]))
    harness = AnthropicHarness(db_url, workspace, sse)
    harness.provider.thinking_budget = 2048
    harness.loop.hooks.add(TitleHook(harness.provider, harness.store, harness.loop.clock))
    assert harness.run("say hi").status == "completed"
    assert sse.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 2048}
    assert sse.requests[0].body["max_tokens"] > 2048
    assert len(sse.title_requests) == 1 and "thinking" not in sse.title_requests[0].body


def test_a_paused_server_tool_turn_is_continued_by_sending_the_response_back(db_url, workspace, sse):
    blocks = web_search_blocks()[:2]  # the search started, then the API paused the turn
    sse.script(reply(blocks, stop_reason="pause_turn"), reply([text("Found it.")]))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("search")
    assert outcome.status == "completed" and outcome.text == "Found it."
    sent = sse.requests[1].body["messages"]
    assert sent[-1]["role"] == "assistant" and [b["type"] for b in sent[-1]["content"]] == ["text", "server_tool_use"]


def test_a_full_context_window_is_recorded_as_the_api_said_it_and_the_user_is_told_so(db_url, workspace, sse):
    sse.script(reply([text("The answer is long and")], stop_reason="model_context_window_exceeded"))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("explain")
    assert outcome.status == "completed" and outcome.text == "The answer is long and"
    assert "context window is full" in outcome.reason and "max_tokens" not in outcome.reason
    response = harness.turn().steps[0]["response"]
    assert response["stop_reason"] == "max_tokens"  # what the loop decides by
    assert response["raw"] == {"stop_reason": "model_context_window_exceeded"}  # what the API sent


def test_a_tool_input_cut_by_the_context_window_says_so(db_url, workspace, sse):
    cut = {"type": "tool_use", "id": "toolu_cut", "name": "write_file", "input": {}, "raw_json": '{"path": "notes.t'}
    sse.script(reply([text("Writing."), cut], stop_reason="model_context_window_exceeded"))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("write notes")
    assert outcome.status == "failed" and "model_context_window_exceeded" in outcome.reason, outcome.reason
    assert "max_tokens" not in outcome.reason
    assert harness.turn().error == {"kind": "max_tokens_tool_input", "tool_use_ids": ["toolu_cut"]}


def test_an_unknown_stop_reason_is_kept_and_named_to_the_user(db_url, workspace, sse):
    sse.script(reply([text("Done, I think.")], stop_reason="brand_new_reason"))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("do it")
    assert outcome.status == "completed" and "'brand_new_reason'" in outcome.reason
    response = harness.turn().steps[0]["response"]
    assert response["stop_reason"] == "end_turn" and response["raw"] == {"stop_reason": "brand_new_reason"}


@pytest.mark.parametrize("raw_json", ['{"path": "hello.txt"', '["hello.txt"]'], ids=["does-not-parse", "not-an-object"])
def test_a_tool_input_that_is_not_an_object_under_tool_use_is_not_called_a_max_tokens_cut(db_url, workspace, sse, raw_json):
    bad = {"type": "tool_use", "id": "toolu_bad", "name": "read_file", "input": {}, "raw_json": raw_json}
    sse.script(reply([text("Reading."), bad], stop_reason="tool_use"), reply([text("ok")]))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("read it")
    assert outcome.status == "failed" and "not a JSON object" in outcome.reason and "read_file" in outcome.reason
    assert "max_tokens" not in outcome.reason, outcome.reason
    turn = harness.turn()
    assert turn.error == {"kind": "invalid_tool_input", "tool_use_ids": ["toolu_bad"]}
    assert turn.steps[0]["response"]["content"][1]["partial_input_json"] == raw_json
    [call] = harness.store.tool_calls_of(turn)
    assert call.status == "failed" and "max_tokens" not in turn.steps[0]["results"][0]["content"]
    assert second_turn(harness, "again").status == "completed"
    assert not sse.refused and "toolu_bad" not in str(sse.requests[1].body["messages"])


def test_duplicate_tool_use_ids_fail_the_turn_and_keep_the_response_which_is_never_sent_back(db_url, workspace, sse):
    sse.script(reply([text("Two reads."), tool("tu_dup", "read_file", path="a"), tool("tu_dup", "read_file", path="b")]),
               reply([text("Sorry.")]))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("read both")
    assert outcome.status == "failed" and "more than once" in outcome.reason
    turn = harness.turn()
    response = turn.steps[0]["response"]
    assert response["stop_reason"] == "error" and response["error"]["kind"] == "invalid_response"
    assert [b.get("input") for b in response["content"]] == [None, {"path": "a"}, {"path": "b"}]  # as the model sent it
    assert response["raw"] == {"stop_reason": "tool_use"}
    assert harness.store.tool_calls_of(turn) == []
    assert second_turn(harness, "again").status == "completed"
    assert "tu_dup" not in str(sse.requests[1].body["messages"])


def test_a_stream_broken_after_a_whole_tool_use_block_fails_the_turn_with_the_break(db_url, workspace, sse):
    events = message_events([text("Reading."), tool("tu_1", "read_file", path="hello.txt")])
    whole_block = max(i for i, (name, _) in enumerate(events) if name == "content_block_stop") + 1
    sse.script(Stream(events, drop_after=whole_block))
    harness = AnthropicHarness(db_url, workspace, sse, max_attempts=1)
    outcome = harness.run("read it")
    assert outcome.status == "failed" and "connection_error" == harness.turn().error["kind"], outcome.reason
    response = harness.turn().steps[0]["response"]
    assert response["stop_reason"] == "error" and [b["type"] for b in response["content"]] == ["text", "tool_use"]
    assert harness.store.tool_calls_of(harness.turn()) == []


def test_a_complete_tool_use_that_fills_the_context_window_fails_the_turn_without_calling_again(db_url, workspace, sse):
    """Without automatic compaction, nothing can make room: every further call would hit the same full window."""
    sse.script(*[reply([text("Reading."), tool(f"tu_{n}", "read_file", path="hello.txt")], stop_reason="model_context_window_exceeded")
                 for n in range(5)])
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("read it")
    assert outcome.status == "failed", outcome
    assert "model_context_window_exceeded" in outcome.reason and "automatic compaction is off" in outcome.reason
    assert "chronicle compact" in outcome.reason and "max_iterations" not in outcome.reason
    assert len(sse.requests) == 1
    assert harness.turn().error == {"kind": "context_window_full", "tool_use_ids": ["tu_0"]}
    [call] = harness.store.tool_calls_of(harness.turn())
    assert call.status == "failed"  # never run: its result could not have been read
