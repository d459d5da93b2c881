"""`chronicle run --provider anthropic` as a user runs it, against a loopback Messages API."""

from __future__ import annotations

from datetime import datetime

import pytest

from chronicle.domain.content import Usage
from chronicle.runtime.pricing import price
from tests.helpers import cli, json_lines
from tests.sse_server import HttpError, overloaded_in_stream, reply, sse  # noqa: F401

KEY = "sk-ant-e2e-dummy-key-987654"
MODEL = "claude-sonnet-4-6"


def env_for(server, **extra: str) -> dict[str, str]:
    return {"ANTHROPIC_BASE_URL": server.url, "ANTHROPIC_API_KEY": KEY, "CHRONICLE_RETRY_BASE_S": "0.01", **extra}


def test_a_multi_step_tool_session_runs_through_retries_and_the_log_shows_every_retry(db_url, workspace, sse):
    usage = {"input_tokens": 1000, "output_tokens": 100, "cache_read_input_tokens": 2000}
    sse.script(
        reply([{"type": "text", "text": "Let me read it."},
               {"type": "tool_use", "id": "tu_1", "name": "read_file", "input": {"path": "hello.txt"}}], usage=usage, model=MODEL),
        HttpError(429, "rate_limit_error", "Number of requests has exceeded your rate limit", {"retry-after-ms": "20"}),
        reply([{"type": "tool_use", "id": "tu_2", "name": "write_file", "input": {"path": "out.txt", "content": "héllo ✓"}}],
              usage=usage, model=MODEL),
        overloaded_in_stream("Half an answ"),
        HttpError(529, "overloaded_error", "Overloaded"),
        reply([{"type": "text", "text": "Wrote out.txt."}], usage=usage, model=MODEL),
    )
    run = cli("run", "copy hello", "--provider", "anthropic", "--model", MODEL, "--workspace", str(workspace), "--json",
              db=db_url, env=env_for(sse))
    assert run.returncode == 0, run.stderr
    events = json_lines(run.stdout)
    assert events[-1]["type"] == "agent_end" and events[-1]["status"] == "completed"
    assert (workspace / "out.txt").read_text(encoding="utf-8") == "héllo ✓"
    retry_status = [e for e in events if e["type"] == "status_change" and e["status"] == "retry"]
    assert len(retry_status) == 3
    usd_live = [e["usd"] for e in events if e["type"] == "usage"]
    assert len(usd_live) == 3 and all(u and u > 0 for u in usd_live)
    session_id = events[0]["session_id"]

    log = json_lines(cli("log", session_id, "--json", db=db_url).stdout)
    retries = [e for e in log if e["event"] == "ModelCallRetried"]
    assert [(r["data"]["step"], r["data"]["attempt"]) for r in retries] == [(1, 1), (2, 1), (2, 2)]
    assert retries[0]["data"]["reason"].startswith("rate_limit_error") and retries[0]["data"]["delay_s"] == 0.02
    assert retries[1]["data"]["reason"].startswith("overloaded_error") and "in the response stream" in retries[1]["data"]["reason"]
    responded = [e for e in log if e["event"] == "ModelResponded"]
    assert [e["data"]["attempts"] for e in responded] == [1, 2, 3]
    human = cli("log", session_id, db=db_url).stdout
    assert human.count("ModelCallRetried") == 3 and "retry in" in human

    sessions = json_lines(cli("sessions", "--json", db=db_url).stdout)
    started = datetime.fromisoformat(sessions[0]["created_at"])
    # The stream that broke after message_start was billed for its input too (its retry event keeps the usage).
    broken = price("claude-sonnet-4-5", Usage(input_tokens=10, output_tokens=1), at=started)
    expected = 3 * price(MODEL, Usage(**usage), at=started) + broken
    assert sessions[0]["cost"] == pytest.approx(expected, rel=1e-6)

    assert all(KEY not in r.raw.decode("utf-8") for r in sse.requests + sse.title_requests)
    assert KEY not in run.stdout + run.stderr
    assert len(sse.title_requests) == 1 and sse.title_requests[0].body["messages"][0]["content"][0]["text"] == "copy hello"
    assert sessions[0]["title"] == "A title"


def test_max_attempts_limits_the_retries_and_the_failure_says_why(sqlite_url, workspace, sse):
    sse.script(*[HttpError(529, "overloaded_error", "Overloaded")] * 2)
    run = cli("run", "hi", "--provider", "anthropic", "--max-attempts", "2", "--workspace", str(workspace), db=sqlite_url, env=env_for(sse))
    assert run.returncode == 1
    assert "Overloaded" in run.stderr and len(sse.requests) == 2


def test_an_invalid_key_fails_at_once_with_the_api_message_and_exit_1(sqlite_url, workspace, sse):
    sse.script(HttpError(401, "authentication_error", "invalid x-api-key"))
    run = cli("run", "hi", "--workspace", str(workspace), db=sqlite_url, env=env_for(sse))  # anthropic is the default with a key
    assert run.returncode == 1
    assert "invalid x-api-key" in run.stderr and "HTTP 401" in run.stderr
    assert len(sse.requests) == 1 and KEY not in run.stderr


def test_a_bad_max_attempts_setting_is_a_usage_error(sqlite_url, workspace, sse):
    run = cli("run", "hi", "--workspace", str(workspace), db=sqlite_url, env=env_for(sse, CHRONICLE_MAX_ATTEMPTS="0"))
    assert run.returncode == 2


@pytest.mark.parametrize("setting, value", [
    ("ANTHROPIC_BASE_URL", "notaurl"),
    ("ANTHROPIC_BASE_URL", "ftp://example.org"),
    ("CHRONICLE_HTTP_TIMEOUT_S", "abc"),
    ("CHRONICLE_HTTP_TIMEOUT_S", "-5"),
    ("CHRONICLE_THINKING_TOKENS", "500"),
    ("CHRONICLE_THINKING_TOKENS", "8192"),
    ("CHRONICLE_THINKING_TOKENS", "lots"),
])
def test_a_bad_provider_setting_is_one_line_naming_it_exit_2_and_no_request(sqlite_url, workspace, sse, setting, value):
    run = cli("run", "hi", "--workspace", str(workspace), db=sqlite_url, env=env_for(sse, **{setting: value}))
    assert run.returncode == 2, run.stderr
    lines = [ln for ln in run.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and f"{setting}=" in lines[0] and "expected" in lines[0]
    assert sse.requests == [] and sse.title_requests == []


def test_cost_counts_a_web_search_response_with_all_of_its_usage(db_url, workspace, sse):
    from tests.sse_server import FULL_USAGE, web_search_blocks

    answering = "claude-sonnet-4-5-20250929"
    sse.script(reply(web_search_blocks(), usage=FULL_USAGE, model=answering))
    run = cli("run", "search it", "--model", MODEL, "--workspace", str(workspace), "--json", db=db_url, env=env_for(sse))
    assert run.returncode == 0, run.stderr
    session_id = json_lines(run.stdout)[0]["session_id"]
    report = json_lines(cli("cost", session_id, "--json", db=db_url).stdout)
    own = next(o for o in report if o["scope"] == "self")
    assert own["input_tokens"] == 1200 and own["cache_creation_input_tokens"] == 900 and own["web_search_requests"] == 2
    started = datetime.fromisoformat(json_lines(cli("sessions", "--json", db=db_url).stdout)[0]["created_at"])
    assert own["usd"] == pytest.approx(price(answering, FULL_USAGE, at=started), rel=1e-6)
    assert own["usd"] > price(answering, {k: v for k, v in FULL_USAGE.items() if k != "server_tool_use"}, at=started)


def test_an_answer_cut_at_max_tokens_exits_0_with_a_warning_line(sqlite_url, workspace, sse):
    sse.script(reply([{"type": "text", "text": "The answer is long and"}], stop_reason="max_tokens"))
    run = cli("run", "explain", "--workspace", str(workspace), db=sqlite_url, env=env_for(sse))
    assert run.returncode == 0
    assert "The answer is long and" in run.stdout
    assert "warning:" in run.stderr and "cut at max_tokens" in run.stderr


def test_a_refusal_exits_1_saying_so_and_the_next_turn_does_not_send_it(sqlite_url, workspace, sse):
    from tests.sse_server import refusal

    sse.script(refusal(""), reply([{"type": "text", "text": "Hi."}]))
    first = cli("run", "bad request", "--workspace", str(workspace), "--json", db=sqlite_url, env=env_for(sse))
    assert first.returncode == 1
    end = json_lines(first.stdout)[-1]
    assert end["status"] == "failed" and "refused" in end["reason"]
    session_id = end["session_id"]
    second = cli("run", "hello", "--session", session_id, "--workspace", str(workspace), db=sqlite_url, env=env_for(sse))
    assert second.returncode == 0, second.stderr
    assert [m["content"][0]["text"] for m in sse.requests[1].body["messages"]] == ["hello"]
