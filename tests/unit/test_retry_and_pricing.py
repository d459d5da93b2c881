"""Retry settings, retry-after parsing, and prices from recorded usage."""

from __future__ import annotations

import json
import logging
from datetime import date, datetime, timezone
from email.utils import format_datetime

import pytest

from chronicle.domain.content import Usage
from chronicle.runtime import pricing
from chronicle.runtime.providers.anthropic_errors import is_prompt_too_long, redact, retry_after_seconds
from chronicle.runtime.retry import RetryPolicy, RetrySettingError


def test_retry_after_ms_wins_over_retry_after_seconds():
    assert retry_after_seconds({"retry-after-ms": "50", "retry-after": "7"}) == 0.05
    assert retry_after_seconds({"retry-after": "7"}) == 7.0
    assert retry_after_seconds({}) is None
    assert retry_after_seconds({"retry-after": "soon"}) is None


@pytest.mark.parametrize("message,fits_after_compaction", [
    ("prompt is too long: 212000 tokens > 200000 maximum", True),
    ("input length and `max_tokens` exceed context limit: 199759 + 8192 > 200000, decrease input length or `max_tokens` and try again", True),
    ("input length and max_tokens exceed context limit: 90402 + 116650 > 204648, decrease input length or max_tokens and try again", True),
    ("This model's maximum context length is 8192 tokens. However, your messages resulted in 8202 tokens.", True),
    ("Input length (160062 tokens) exceeds the maximum allowed length (59862 tokens).", True),
    # max_tokens alone fills the window: no shorter input helps.
    ("input length and `max_tokens` exceed context limit: 1000 + 250000 > 200000, decrease input length or `max_tokens` and try again", False),
    ("max_tokens: 250000 > 64000, which is the maximum allowed number of output tokens for claude-sonnet-4-5", False),
    ("messages.1.content.0: unexpected `tool_use_id` found in `tool_result` blocks", False),
])
def test_a_context_window_overflow_is_told_apart_in_every_wording(message, fits_after_compaction):
    assert is_prompt_too_long(message) is fits_after_compaction


def test_retry_after_as_an_http_date_counts_from_now():
    now = datetime(2026, 11, 1, 12, 0, 0, tzinfo=timezone.utc)
    header = format_datetime(datetime(2026, 11, 1, 12, 0, 9, tzinfo=timezone.utc), usegmt=True)
    assert retry_after_seconds({"retry-after": header}, now=now.timestamp()) == 9.0


def test_backoff_doubles_within_twenty_percent_and_stops_at_the_cap():
    policy = RetryPolicy()
    for attempt, nominal in [(1, 2.0), (2, 4.0), (3, 8.0), (4, 16.0)]:
        assert nominal * 0.8 <= policy.delay(attempt) <= nominal * 1.2
    assert policy.delay(9) <= 30.0
    assert policy.delay(1, retry_after_s=3.5) == 3.5
    assert policy.delay(1, retry_after_s=90) == 90.0, "the server's wait is honoured past the backoff cap"
    assert policy.delay(1, retry_after_s=86_400) == 300.0, "but not a day-long one"


def test_the_environment_configures_attempts_and_backoff(monkeypatch):
    monkeypatch.setenv("CHRONICLE_MAX_ATTEMPTS", "3")
    monkeypatch.setenv("CHRONICLE_RETRY_BASE_S", "0.01")
    policy = RetryPolicy.from_env()
    assert (policy.max_attempts, policy.base_s, policy.cap_s) == (3, 0.01, 30.0)
    assert RetryPolicy.from_env(max_attempts=5).max_attempts == 5


@pytest.mark.parametrize("name,value", [("CHRONICLE_MAX_ATTEMPTS", "many"), ("CHRONICLE_MAX_ATTEMPTS", "0"), ("CHRONICLE_RETRY_BASE_S", "-1")])
def test_a_bad_retry_setting_is_refused_with_its_name(monkeypatch, name, value):
    monkeypatch.setenv(name, value)
    with pytest.raises(RetrySettingError, match="CHRONICLE_|at least 1"):
        RetryPolicy.from_env()


def test_the_key_is_redacted_from_any_message(monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-very-secret")
    assert redact("bad key sk-ant-very-secret given") == "bad key *** given"


def test_a_known_model_is_priced_with_cache_writes_and_reads():
    usage = Usage(input_tokens=1_000, output_tokens=1_000, cache_creation_input_tokens=1_000, cache_read_input_tokens=1_000)
    # claude-sonnet-4-5: $3 input, $15 output, $3.75 cache write, $0.30 cache read per million tokens.
    assert pricing.price("claude-sonnet-4-5", usage, at=date(2026, 1, 1)) == pytest.approx(0.02205)
    assert pricing.price("claude-sonnet-4-5-20250929", usage, at=date(2026, 1, 1)) == pytest.approx(0.02205)
    cheaper = Usage(input_tokens=1_000, output_tokens=1_000, cache_read_input_tokens=2_000)
    assert pricing.price("claude-sonnet-4-5", cheaper, at=date(2026, 1, 1)) < pricing.price("claude-sonnet-4-5", usage, at=date(2026, 1, 1))


def test_an_unknown_model_costs_null_with_a_warning_and_never_raises(caplog):
    with caplog.at_level(logging.WARNING, logger="chronicle.pricing"):
        assert pricing.price("claude-imaginary-9", Usage(input_tokens=10)) is None
    assert "claude-imaginary-9" in caplog.text
    assert pricing.total([("claude-imaginary-9", Usage(input_tokens=10), None)]) is None
    assert pricing.total([("claude-imaginary-9", Usage(), None)]) == 0.0


def test_an_override_file_prices_by_the_entry_in_force_at_the_call_date(tmp_path, monkeypatch):
    table = {"models": {"claude-sonnet-4-5": [
        {"from": "2025-01-01", "input_mtok": 1, "output_mtok": 2, "cache_write_mtok": 0, "cache_read_mtok": 0},
        {"from": "2026-06-01", "input_mtok": 10, "output_mtok": 20, "cache_write_mtok": 0, "cache_read_mtok": 0},
    ], "in-house-model": {"from": "2020-01-01", "input_mtok": 5, "output_mtok": 5}}}
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(table))
    monkeypatch.setenv("CHRONICLE_PRICES", str(path))
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert pricing.price("claude-sonnet-4-5", usage, at=date(2026, 1, 1)) == 3.0
    assert pricing.price("claude-sonnet-4-5-20250929", usage, at=date(2026, 7, 1)) == 30.0
    assert pricing.price("in-house-model", usage, at=date(2026, 7, 1)) == 10.0


def test_a_broken_override_file_fails_loudly_instead_of_dropping_the_custom_prices(tmp_path, monkeypatch):
    path = tmp_path / "prices.json"
    path.write_text("{not json")
    monkeypatch.setenv("CHRONICLE_PRICES", str(path))
    with pytest.raises(pricing.PriceTableError, match="not valid JSON"):
        pricing.price("claude-sonnet-4-5", Usage(input_tokens=100_000), at=date(2026, 1, 1))


def test_one_hour_cache_writes_and_web_searches_are_priced_as_reported():
    at = date(2026, 11, 1)
    base = {"input_tokens": 1000, "output_tokens": 100, "cache_creation_input_tokens": 300}
    five_min = pricing.price("claude-sonnet-4-5", {**base, "cache_creation": {"ephemeral_5m_input_tokens": 300}}, at)
    one_hour = pricing.price("claude-sonnet-4-5", {**base, "cache_creation": {"ephemeral_1h_input_tokens": 300}}, at)
    searched = pricing.price("claude-sonnet-4-5", {**base, "server_tool_use": {"web_search_requests": 2}}, at)
    plain = pricing.price("claude-sonnet-4-5", base, at)
    assert five_min == pytest.approx(plain)
    assert one_hour == pytest.approx(plain + 300 * (6.0 - 3.75) / 1e6)  # 1h writes 2x input, 5m 1.25x
    assert searched == pytest.approx(plain + 2 * 10 / 1000)  # $10 per 1,000 searches


def test_an_override_entry_prices_one_hour_writes_and_searches(tmp_path, monkeypatch):
    table = {"models": {"claude-z": [{"from": "2026-01-01", "input_mtok": 1, "output_mtok": 2, "cache_write_1h_mtok": 4,
                                      "web_search_per_1k": 5}]}}
    path = tmp_path / "prices.json"
    path.write_text(json.dumps(table))
    monkeypatch.setenv("CHRONICLE_PRICES", str(path))
    usage = {"input_tokens": 1_000_000, "cache_creation_input_tokens": 1_000_000,
             "cache_creation": {"ephemeral_1h_input_tokens": 1_000_000}, "server_tool_use": {"web_search_requests": 4}}
    assert pricing.price("claude-z", usage, date(2026, 6, 1)) == pytest.approx(1 + 4 + 4 * 5 / 1000)


def test_a_call_that_only_searched_is_not_free():
    assert Usage(server_tool_use={"web_search_requests": 1}).used
    assert not Usage(service_tier="standard", inference_geo="us").used


def test_a_model_found_unpriced_once_is_not_looked_up_again_but_an_override_still_prices_it(tmp_path, monkeypatch):
    usage = Usage(input_tokens=1_000_000, output_tokens=1_000_000)
    assert pricing.price("local-llama-unpriced", usage) is None
    assert "local-llama-unpriced" in pricing._UNKNOWN, "remembered as unknown to the bundled table"
    assert pricing.price("local-llama-unpriced", usage) is None
    path = tmp_path / "prices.json"
    path.write_text(json.dumps({"models": {"local-llama-unpriced": {"input_mtok": 1, "output_mtok": 1}}}))
    monkeypatch.setenv("CHRONICLE_PRICES", str(path))
    assert pricing.price("local-llama-unpriced", usage) == 2.0, "the operator's price is read before the bundled table"
    assert pricing.price("claude-sonnet-4-5", Usage(input_tokens=10)) is not None, "known models are not cached as unknown"
