"""The real loop and the real `openai` SDK against a loopback chat-completions server, on SQLite and PostgreSQL."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import pytest

from chronicle.runtime.live import StatusChange, UsageEvent
from chronicle.runtime.providers import ProviderConfigError, make_provider
from chronicle.runtime.providers.openai_compat import OpenAICompatProvider
from tests.chat_sse_server import chat_reply, chat_sse, error_in_stream  # noqa: F401
from tests.loop_harness import LoopHarness
from tests.sse_server import DropConnection, HttpError, Stream

KEY = "sk-openai-test-0123456789-secret"
MODEL = "local-model"


def tool(id_: str, name: str, **args: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": id_, "name": name, "input": args}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


class Harness(LoopHarness):
    def __init__(self, db_url: str, workspace: Path, server: Any, max_attempts: int = 8, model: str = MODEL,
                 timeout_s: float | None = None) -> None:
        provider = OpenAICompatProvider(model, api_key=KEY, base_url=server.url + "/v1", timeout_s=timeout_s)
        super().__init__(db_url, workspace, provider, "openai-compatible", model, max_attempts=max_attempts)


def test_tool_calls_stream_in_pieces_and_go_back_as_tool_messages_after_the_assistant_message(db_url, workspace, chat_sse):
    (workspace / "b.txt").write_text("bee")
    chat_sse.script(
        chat_reply(
            [
                text("Reading two."),
                tool("call_a", "read_file", path="hello.txt"),
                tool("call_b", "read_file", path="missing.txt"),
            ],
            usage={"prompt_tokens": 120, "completion_tokens": 30, "prompt_tokens_details": {"cached_tokens": 100}},
        ),
        chat_reply([text("Done: hello world.")]),
    )
    harness = Harness(db_url, workspace, chat_sse)
    outcome = harness.run("read them")
    assert outcome.status == "completed" and outcome.text == "Done: hello world."

    first = chat_sse.requests[0]
    assert first.path == "/v1/chat/completions"
    assert first.headers["authorization"] == f"Bearer {KEY}"
    assert first.body["stream"] is True and first.body["stream_options"] == {"include_usage": True}
    assert first.body["messages"][0] == {"role": "system", "content": "You are careful."}
    functions = {t["function"]["name"]: t["function"] for t in first.body["tools"]}
    assert functions["read_file"]["parameters"]["type"] == "object"

    second = chat_sse.requests[1].body["messages"]
    assert [m["role"] for m in second] == ["system", "user", "assistant", "tool", "tool"]
    assert [c["id"] for c in second[2]["tool_calls"]] == ["call_a", "call_b"]
    assert second[2]["tool_calls"][0]["function"] == {"name": "read_file", "arguments": '{"path": "hello.txt"}'}
    assert second[3]["tool_call_id"] == "call_a" and second[3]["content"].startswith("hello world")
    assert second[4]["tool_call_id"] == "call_b" and second[4]["content"].startswith("[error]")

    step = harness.turn().steps[0]["response"]
    assert [b["type"] for b in step["content"]] == ["text", "tool_use", "tool_use"]
    assert step["content"][1]["input"] == {"path": "hello.txt"}
    assert step["stop_reason"] == "tool_use" and step["id"] == "chatcmpl-test"
    # Cached prompt tokens move out of input, as the Anthropic convention that pricing uses.
    assert step["usage"] == {
        "input_tokens": 20,
        "output_tokens": 30,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 100,
    }
    raw = step["raw"]
    assert raw["choices"][0]["finish_reason"] == "tool_calls"
    assert raw["choices"][0]["message"]["tool_calls"][1]["function"]["arguments"] == '{"path": "missing.txt"}'
    assert raw["usage"]["prompt_tokens_details"] == {"cached_tokens": 100} and raw["system_fingerprint"] == "fp_test"
    texts = [e.delta["text"] for e in harness.events if getattr(e, "delta", None) and e.delta.get("type") == "text"]
    assert "".join(texts) == "Reading two.Done: hello world."
    assert KEY not in str(harness.store.session(harness.session_id).__dict__)


def test_retryable_failures_are_retried_with_the_loops_policy_and_recorded(db_url, workspace, chat_sse):
    chat_sse.script(
        HttpError(429, "rate_limit_exceeded", "slow down", headers={"retry-after-ms": "10"}),
        error_in_stream("server_error", "the model crashed", after_text="partial"),
        DropConnection(),
        chat_reply([text("Finally.")]),
    )
    harness = Harness(db_url, workspace, chat_sse)
    outcome = harness.run("hi")
    assert outcome.status == "completed" and outcome.text == "Finally."
    turn = harness.turn()
    kinds = [r["error"]["kind"] for r in turn.retries]
    assert kinds == ["rate_limit_exceeded", "server_error", "connection_error"]
    assert turn.retries[0]["error"]["status"] == 429 and turn.retries[0]["delay_s"] == pytest.approx(0.01)
    assert turn.steps[0]["response"]["content"] == [{"type": "text", "text": "Finally."}]
    retries = [e for e in harness.events if isinstance(e, StatusChange) and e.status == "retry"]
    assert [e.attempt for e in retries] == [2, 3, 4]


@pytest.mark.timeout(60)
def test_a_stream_kept_alive_by_comments_alone_times_out_and_is_retried(db_url, workspace, chat_sse):
    """Keep-alive comments reset the HTTP client's per-read timeout; the stall is bounded by the time without a chunk."""
    stalled = chat_reply([text("The first words, then nothing")])
    chat_sse.script(Stream(stalled.events, hang_after=2), chat_reply([text("Finally.")]))
    harness = Harness(db_url, workspace, chat_sse, timeout_s=1.0)
    outcome = harness.run("hi")
    assert outcome.status == "completed" and outcome.text == "Finally."
    [retry] = harness.turn().retries
    assert retry["error"]["kind"] == "timeout" and "no content" in retry["reason"], retry
    assert chat_sse.wait_for(lambda: chat_sse.requests[0].closed_early), "the stalled stream was never closed"


def test_a_bad_request_fails_the_turn_once_with_the_servers_message_and_no_key(db_url, workspace, chat_sse):
    chat_sse.script(HttpError(400, "invalid_request_error", f"model not found (your key {KEY})"))
    harness = Harness(db_url, workspace, chat_sse)
    outcome = harness.run("hi")
    assert outcome.status == "failed" and len(chat_sse.requests) == 1
    error = harness.turn().steps[0]["response"]["error"]
    assert error["kind"] == "invalid_request_error" and error["status"] == 400 and error["retryable"] is False
    assert "model not found" in error["message"] and KEY not in error["message"]


def test_reasoning_is_kept_as_thinking_but_not_sent_back_and_usage_is_priced_when_known(db_url, workspace, chat_sse):
    chat_sse.script(
        chat_reply(
            [{"type": "reasoning", "text": "Think first."}, text("Answer.")],
            model="gpt-4o-2024-08-06",
            usage={"prompt_tokens": 1000, "completion_tokens": 1000},
        ),
    )
    harness = Harness(db_url, workspace, chat_sse, model="gpt-4o-2024-08-06")
    outcome = harness.run("hi")
    assert outcome.status == "completed" and outcome.text == "Answer."
    step = harness.turn().steps[0]["response"]
    assert step["content"][0] == {"type": "thinking", "thinking": "Think first.", "signature": ""}
    assert step["raw"]["choices"][0]["message"]["reasoning_content"] == "Think first."
    usage = [e for e in harness.events if isinstance(e, UsageEvent)][0]
    assert usage.usd is not None and usage.usd > 0


def test_make_provider_needs_a_model_for_openai_compatible(monkeypatch):
    monkeypatch.delenv("OPENAI_MODEL", raising=False)
    with pytest.raises(ProviderConfigError, match="needs a model"):
        make_provider("openai-compatible", None)
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    provider = make_provider("openai-compatible", "qwen3")
    assert isinstance(provider, OpenAICompatProvider) and provider.base_url == "http://127.0.0.1:9/v1"


def test_chronicle_run_with_openai_compatible_records_the_provider_and_resumes_with_it(db_url, workspace, chat_sse):
    from tests.helpers import cli, json_lines

    chat_sse.script(chat_reply([text("Hi from a local model.")]), chat_reply([text("Second answer.")]))
    env = {"OPENAI_BASE_URL": chat_sse.url + "/v1", "OPENAI_API_KEY": KEY, "CHRONICLE_RETRY_BASE_S": "0.01"}
    run = cli(
        "run",
        "hello",
        "--provider",
        "openai-compatible",
        "--model",
        "qwen3",
        "--workspace",
        str(workspace),
        "--json",
        db=db_url,
        env=env,
    )
    assert run.returncode == 0, run.stderr
    events = json_lines(run.stdout)
    assert events[-1]["status"] == "completed" and chat_sse.requests[0].body["model"] == "qwen3"
    again = cli("run", "more", "--session", events[0]["session_id"], "--json", db=db_url, env=env)
    assert again.returncode == 0, again.stderr
    assert [m["role"] for m in chat_sse.requests[1].body["messages"] if m["role"] != "system"] == ["user", "assistant", "user"]
    missing = cli(
        "run",
        "hello",
        "--provider",
        "openai-compatible",
        "--workspace",
        str(workspace),
        db=db_url,
        env={**env, "OPENAI_MODEL": "", "CHRONICLE_MODEL": ""},
    )
    assert missing.returncode == 2 and "needs a model" in missing.stderr


def test_an_attached_image_is_sent_as_a_data_url_part(db_url, workspace, chat_sse):
    from chronicle.runtime.attachments import store_attachments
    from tests.mcp_server import PNG

    chat_sse.script(chat_reply([text("A tiny picture.")]))
    harness = Harness(db_url, workspace, chat_sse)
    blocks = store_attachments(harness.store, [(PNG, "image/png")])
    assert harness.run("what is this?", attachments=blocks).status == "completed"
    sent = chat_sse.requests[0].body["messages"][-1]
    assert sent["role"] == "user" and sent["content"][0] == {"type": "text", "text": "what is this?"}
    assert sent["content"][1]["image_url"]["url"] == "data:image/png;base64," + base64.b64encode(PNG).decode()
