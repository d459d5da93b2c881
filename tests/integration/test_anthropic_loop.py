"""The real loop and the real SDK against a loopback Messages API, on SQLite and PostgreSQL."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from chronicle.runtime.compression import SizedZlib
from chronicle.runtime.providers.anthropic_provider import AnthropicProvider
from chronicle.runtime.store import ChronicleStore
from tests.loop_harness import LoopHarness, first_text, run_cancelled_when
from tests.sse_server import DropConnection, HttpError, Stream, message_events, overloaded_in_stream, reply, sse  # noqa: F401

KEY = "sk-ant-test-0123456789-secret"
MODEL = "claude-sonnet-4-6"


def tool(id_: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": name, "input": args}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


class AnthropicHarness(LoopHarness):
    def __init__(self, db_url: str, workspace: Path, server: Any, max_attempts: int = 8, on_event: Any = None, cap_s: float = 0.05,
                 timeout_s: float | None = None) -> None:
        provider = AnthropicProvider(MODEL, api_key=KEY, base_url=server.url, timeout_s=timeout_s)
        super().__init__(db_url, workspace, provider, "anthropic", MODEL, max_attempts=max_attempts, on_event=on_event, cap_s=cap_s)


def test_parallel_tool_uses_are_answered_by_one_user_message_of_results_in_order(db_url, workspace, sse):
    (workspace / "b.txt").write_text("bee")
    sse.script(
        reply([text("Reading three."), tool("tu_a", "read_file", path="hello.txt"), tool("tu_b", "read_file", path="b.txt"),
               tool("tu_c", "read_file", path="missing.txt")]),
        reply([text("Done.")]),
    )
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("read them")
    assert outcome.status == "completed" and outcome.text == "Done."
    second = sse.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["user", "assistant", "user"]
    assert [b["id"] for b in second[1]["content"] if b["type"] == "tool_use"] == ["tu_a", "tu_b", "tu_c"]
    results = second[2]["content"]
    assert [b["type"] for b in results] == ["tool_result"] * 3
    assert [b["tool_use_id"] for b in results] == ["tu_a", "tu_b", "tu_c"]
    assert results[0]["content"].startswith("hello world") and results[2]["is_error"] is True


def test_thinking_blocks_go_back_verbatim_with_their_signature(db_url, workspace, sse):
    thinking = {"type": "thinking", "thinking": "The user wants hello.txt — 日本語 too.", "signature": "EqQBCkYIARgCIkDn+sig/=="}
    redacted = {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"}
    sse.script(reply([thinking, redacted, tool("tu_1", "read_file", path="hello.txt")], split=5), reply([text("ok")]))
    harness = AnthropicHarness(db_url, workspace, sse)
    assert harness.run("look").status == "completed"
    assistant = sse.requests[1].body["messages"][1]
    assert assistant["content"][0] == thinking
    assert assistant["content"][1] == redacted
    assert assistant["content"][2] == tool("tu_1", "read_file", path="hello.txt")
    recorded = harness.turn().steps[0]["response"]["content"]
    assert recorded[0] == thinking and recorded[1] == redacted


def test_system_prompt_last_tool_and_newest_message_carry_cache_control_and_usage_shows_cache_reads(db_url, workspace, sse):
    sse.script(reply([text("hi")], usage={"input_tokens": 5, "output_tokens": 2, "cache_read_input_tokens": 4000,
                                           "cache_creation_input_tokens": 100}))
    harness = AnthropicHarness(db_url, workspace, sse)
    assert harness.run("hello").status == "completed"
    body = sse.requests[0].body
    assert body["system"] == [{"type": "text", "text": "You are careful.", "cache_control": {"type": "ephemeral"}}]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in t for t in body["tools"][:-1])
    assert body["messages"][-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    usage = [e for e in harness.events if e.type == "usage"][0]
    assert usage.usage["cache_read_input_tokens"] == 4000 and usage.usage["cache_creation_input_tokens"] == 100
    assert usage.usd is not None and usage.usd > 0
    stored = harness.turn().steps[0]["response"]["usage"]
    assert stored["cache_read_input_tokens"] == 4000


@pytest.mark.parametrize(
    "failure,reason_kind,expected_delay",
    [
        (HttpError(429, "rate_limit_error", "Number of requests has exceeded your rate limit", {"retry-after-ms": "30"}), "rate_limit_error", 0.03),
        (HttpError(529, "overloaded_error", "Overloaded", {"retry-after": "0.02"}), "overloaded_error", 0.02),
        (HttpError(429, "rate_limit_error", "slow down"), "rate_limit_error", None),
        (HttpError(529, "overloaded_error", "Overloaded"), "overloaded_error", None),
        (HttpError(503, "api_error", "Service unavailable"), "api_error", None),
        (overloaded_in_stream("Partial answer that will be thrown away"), "overloaded_error", None),
        (DropConnection(), "connection_error", None),
    ],
    ids=["429-retry-after-ms", "529-retry-after", "429-backoff", "529-backoff", "503", "overload-in-200-stream", "dropped-connection"],
)
def test_retryable_failures_are_retried_and_each_retry_is_recorded(db_url, workspace, sse, failure, reason_kind, expected_delay):
    sse.script(failure, failure, reply([text("Finally.")]))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("hi")
    assert outcome.status == "completed" and outcome.text == "Finally."
    retries = harness.turn().retries
    assert [r["attempt"] for r in retries] == [1, 2]
    assert all(r["reason"].startswith(reason_kind) for r in retries)
    if expected_delay is not None:
        assert [r["delay_s"] for r in retries] == [expected_delay, expected_delay]
    else:  # policy: 0.01 * 2^(n-1) ± 20 %
        assert 0.008 <= retries[0]["delay_s"] <= 0.012 and 0.016 <= retries[1]["delay_s"] <= 0.024
    statuses = [e for e in harness.events if e.type == "status_change" and e.status == "retry"]
    assert [s.attempt for s in statuses] == [2, 3] and all(s.next_attempt_at for s in statuses)
    assert len(sse.requests) == 3
    steps = harness.turn().steps
    assert len(steps) == 1 and steps[0]["response"]["content"] == [text("Finally.")]


def test_retries_stop_at_max_attempts_and_the_turn_fails_with_the_last_error(db_url, workspace, sse):
    sse.script(*[HttpError(529, "overloaded_error", "Overloaded")] * 3)
    harness = AnthropicHarness(db_url, workspace, sse, max_attempts=3)
    outcome = harness.run("hi")
    assert outcome.status == "failed" and "Overloaded" in outcome.reason
    assert len(sse.requests) == 3 and len(harness.turn().retries) == 2


@pytest.mark.parametrize("status,error_type,message", [
    (400, "invalid_request_error", "messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks"),
    (401, "authentication_error", "invalid x-api-key"),
    (403, "permission_error", "Your API key does not have permission to use the specified resource."),
    (404, "not_found_error", "model: claude-nope"),
    (413, "request_too_large", "Request exceeds the maximum allowed number of bytes."),
])
def test_non_retryable_errors_fail_the_turn_at_once_with_the_api_message(db_url, workspace, sse, status, error_type, message):
    sse.script(HttpError(status, error_type, message), reply([text("never")]))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("hi")
    assert outcome.status == "failed"
    assert message in outcome.reason and f"HTTP {status}" in outcome.reason
    turn = harness.turn()
    assert turn.retries == [] and len(sse.requests) == 1
    assert turn.error["kind"] == error_type and turn.error["status"] == status and turn.error["retryable"] is False


def test_a_prompt_too_long_is_a_clear_failure_of_its_own_kind(db_url, workspace, sse):
    sse.script(HttpError(400, "invalid_request_error", "prompt is too long: 212000 tokens > 200000 maximum"))
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("hi")
    assert outcome.status == "failed" and "prompt is too long" in outcome.reason
    assert harness.turn().error["kind"] == "prompt_too_long"


def test_cancelling_mid_stream_closes_the_http_stream_and_records_the_partial_answer_as_aborted(db_url, workspace, sse):
    events = message_events([text("The first words, then a very long pause")], split=16)
    sse.script(Stream(events, hang_after=4))  # message_start, ping, block_start, first text delta

    harness, outcome = run_cancelled_when(lambda **kw: AnthropicHarness(db_url, workspace, sse, **kw), "talk", first_text)
    assert outcome is not None and outcome.status == "cancelled"
    step = harness.turn().steps[0]["response"]
    assert step["stop_reason"] == "aborted" and step["content"] == [text("The first words,")]
    assert sse.wait_for(lambda: sse.requests[0].closed_early), "the server never saw the stream closed"


@pytest.mark.timeout(60)
def test_a_stream_that_sends_only_pings_times_out_and_is_retried(db_url, workspace, sse):
    """The API keeps a stalled stream alive with `ping` events: each read gets bytes, so the SDK's
    per-read timeout never fires. The timeout bounds the time without content instead."""
    events = message_events([text("The first words, then only pings")], split=16, usage={"input_tokens": 900})
    sse.script(Stream(events, hang_after=4, ping_every_s=0.2), reply([text("Finally.")]))
    harness = AnthropicHarness(db_url, workspace, sse, timeout_s=1.0)
    started = time.monotonic()
    outcome = harness.run("hi")
    assert outcome.status == "completed" and outcome.text == "Finally."
    assert time.monotonic() - started < 10
    [retry] = harness.turn().retries
    assert retry["reason"].startswith("timeout: ") and "no content" in retry["reason"], retry
    assert retry["error"]["usage"]["input_tokens"] == 900  # the stalled attempt was billed for its input
    assert sse.wait_for(lambda: sse.requests[0].closed_early), "the stalled stream was never closed"


def test_a_slow_stream_that_keeps_sending_content_is_not_timed_out(db_url, workspace, sse):
    events = message_events([text("Slow but steady words")], split=7)  # 10 events, 0.2 s apart: 2 s in all
    sse.script(Stream(events, delay_s=0.2))
    harness = AnthropicHarness(db_url, workspace, sse, timeout_s=1.0)
    outcome = harness.run("hi")
    assert outcome.status == "completed" and outcome.text == "Slow but steady words"
    assert harness.turn().retries == []


def test_the_wait_between_retries_can_be_cancelled(db_url, workspace, sse):
    sse.script(HttpError(429, "rate_limit_error", "slow down", {"retry-after": "25"}), reply([text("too late")]))

    harness, outcome = run_cancelled_when(lambda **kw: AnthropicHarness(db_url, workspace, sse, cap_s=30.0, **kw), "hi",
                                          lambda event: event.type == "status_change" and event.status == "retry")
    assert outcome.status == "cancelled"
    turn = harness.turn()
    assert [r["delay_s"] for r in turn.retries] == [25.0]
    assert turn.steps[0]["response"]["stop_reason"] == "aborted"
    assert len(sse.requests) == 1


def _plain(value: Any) -> bytes:
    """A column's bytes, and a compressed state's JSON after them."""
    if not isinstance(value, (bytes, memoryview)):
        return str(value).encode()
    raw = bytes(value)
    try:
        return raw + b"\n" + SizedZlib().decompress(raw)
    except Exception:  # noqa: BLE001 - not a compressed state (a digest, a ciphertext)
        return raw


def _all_stored_bytes(store: ChronicleStore) -> bytes:
    """Every table's rows and the database files, plus every event and snapshot state decompressed
    (runtime/compression.py), so a key inside a compressed state would show."""
    recorder: Any = store.recorder
    chunks: list[bytes] = []
    if store.backend == "sqlite":
        with recorder.datastore.transaction(commit=False) as cursor:
            cursor.execute("SELECT name FROM sqlite_master WHERE type='table'")
            tables = [r[0] for r in cursor.fetchall()]
            for table in tables:
                cursor.execute(f"SELECT * FROM {table}")
                for row in cursor.fetchall():
                    chunks.extend(_plain(v) for v in tuple(row))
        path = Path(store.url[len("sqlite://"):])
        for file in path.parent.glob(path.name + "*"):  # the file and its WAL
            chunks.append(file.read_bytes())
        return b"\n".join(chunks)
    schema = recorder.datastore.schema or "public"
    with recorder.datastore.transaction(commit=False) as cursor:
        cursor.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (schema,))
        for row in cursor.fetchall():
            cursor.execute(f'SELECT * FROM "{schema}"."{row["table_name"]}"')
            for record in cursor.fetchall():
                chunks.extend(_plain(v) for v in record.values())
    return b"\n".join(chunks)


def test_the_api_key_reaches_neither_the_database_nor_any_error_message(db_url, workspace, sse):
    sse.script(
        reply([tool("tu_1", "read_file", path="hello.txt")]),
        HttpError(529, "overloaded_error", f"Overloaded (your key {KEY} is fine)"),
        HttpError(401, "authentication_error", f"invalid x-api-key: {KEY}"),
    )
    harness = AnthropicHarness(db_url, workspace, sse)
    outcome = harness.run("hi")
    assert outcome.status == "failed"
    assert KEY not in outcome.reason and "***" in outcome.reason
    assert all(KEY not in e.model_dump_json() for e in harness.events)
    stored = _all_stored_bytes(harness.store)
    assert b"tu_1" in stored  # the dump does see the session's events
    assert KEY.encode() not in stored
    assert sse.requests[0].headers.get("authorization") == f"Bearer {KEY}" or sse.requests[0].headers.get("x-api-key") == KEY
    assert all(KEY.encode() not in r.raw for r in sse.requests)
