"""The Anthropic provider's environment settings: valid values pass, bad ones name the setting."""

from __future__ import annotations

import pytest

from chronicle.runtime.providers.env_settings import SettingError, base_url, check_anthropic_env, http_timeout_s, thinking_budget


@pytest.mark.parametrize("raw, expected", [(None, None), ("", None), ("1024", 1024), (" 4096 ", 4096), ("8191", 8191)])
def test_thinking_budget_accepts_1024_up_to_below_max_tokens(raw, expected):
    assert thinking_budget(raw, 8192) == expected


@pytest.mark.parametrize("raw", ["1023", "8192", "100000", "0", "-1", "2k", "1e4", "nan"])
def test_thinking_budget_outside_the_api_rules_names_the_setting(raw):
    with pytest.raises(SettingError, match=r"^CHRONICLE_THINKING_TOKENS=.*at least 1024 and below max_tokens 8192"):
        thinking_budget(raw, 8192)


@pytest.mark.parametrize("raw, expected", [(None, 600.0), ("", 600.0), ("30", 30.0), ("0.5", 0.5)])
def test_http_timeout_accepts_positive_seconds(raw, expected):
    assert http_timeout_s(raw) == expected


@pytest.mark.parametrize("raw", ["abc", "0", "-3", "inf", "nan"])
def test_http_timeout_that_is_no_positive_number_names_the_setting(raw):
    with pytest.raises(SettingError, match=r"^CHRONICLE_HTTP_TIMEOUT_S="):
        http_timeout_s(raw)


@pytest.mark.parametrize("raw", ["notaurl", "api.anthropic.com", "ftp://x.org", "http://", "https://host:port/"])
def test_base_url_must_be_http_with_a_host(raw):
    with pytest.raises(SettingError, match=r"^ANTHROPIC_BASE_URL="):
        base_url(raw)


def test_valid_settings_come_back_by_name():
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9/", "CHRONICLE_HTTP_TIMEOUT_S": "12", "CHRONICLE_THINKING_TOKENS": "2048"}
    assert check_anthropic_env(8192, env) == {
        "ANTHROPIC_BASE_URL": "http://127.0.0.1:9/", "CHRONICLE_HTTP_TIMEOUT_S": 12.0, "CHRONICLE_THINKING_TOKENS": 2048,
    }


def test_a_session_thinking_budget_is_checked_by_the_same_range_as_the_environment_one(monkeypatch):
    """One function owns 1024 ≤ budget < max_tokens: `chronicle model --thinking` and CHRONICLE_THINKING_TOKENS say
    the same range in the same words, each naming where its value came from and how to turn thinking off there."""
    from chronicle.runtime.app.errors import AppError
    from chronicle.runtime.app.model_change import check_thinking

    monkeypatch.setenv("CHRONICLE_MAX_TOKENS", "4096")
    with pytest.raises(SettingError) as from_env:
        thinking_budget("5000", 4096)
    with pytest.raises(AppError) as from_session:
        check_thinking(5000)
    shared = "expected a whole number of tokens from 1024 to 4095 (at least 1024 and below max_tokens 4096)"
    assert str(from_env.value) == f"CHRONICLE_THINKING_TOKENS='5000': {shared}, or unset for no thinking"
    assert str(from_session.value) == f"thinking tokens 5000: {shared}, or 0 for off"
    assert check_thinking(4095) == 4095 and check_thinking(0) == 0
