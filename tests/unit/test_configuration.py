"""One configuration model: every flag, environment variable and chronicle.toml value validated, errors naming it."""

from __future__ import annotations

import pytest

from chronicle.runtime.environment import EnvironmentSettingError, environment
from chronicle.runtime.settings import LimitFlags, SettingsError, load_settings


def toml(tmp_path, text: str):
    (tmp_path / "chronicle.toml").write_text(text, encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("text,named", [
    ('[compaction]\nauto = "yes"\n', r"\[compaction\] auto: expected true or false, got 'yes'"),
    ("[compaction]\nthreshold = 1.5\n", r"\[compaction\] threshold: expected a number ≤ 1"),
    ("[compaction]\ncritical = -0.1\n", r"\[compaction\] critical: expected a number ≥ 0"),
    ("[limits]\nbudget_usd = nan\n", r"\[limits\] budget_usd: expected a finite number, got nan"),
    ("[limits]\nmax_tool_calls = 2.5\n", r"\[limits\] max_tool_calls: expected a whole number"),
    ("[limits]\nbudget = 1\n", r"\[limits\] budget: unknown key"),
    # quoted numbers are refused, not quietly converted: the key, the file and the type it needs
    ('[limits]\nmax_tool_calls = "10"\n', r"chronicle.toml: \[limits\] max_tool_calls: expected a whole number, got '10'"),
    ('[limits]\nbudget_usd = "1.5"\n', r"chronicle.toml: \[limits\] budget_usd: expected a number, got '1.5'"),
    ('[limits]\ndoom_loop = true\n', r"\[limits\] doom_loop: expected a whole number, got True"),
    ('[compaction]\nkeep_recent = "3"\n', r"\[compaction\] keep_recent: expected a whole number, got '3'"),
    ('[compaction]\nthreshold = "0.5"\n', r"\[compaction\] threshold: expected a number, got '0.5'"),
    ('[limits]\nmax_iterations = "10"\n', r"\[limits\] max_iterations: unknown key; .* \[agents.main\]"),
])
def test_a_bad_chronicle_toml_value_is_refused_naming_the_setting_and_type(tmp_path, text, named):
    with pytest.raises(SettingsError, match=named):
        load_settings(LimitFlags(), toml(tmp_path, text))


def test_a_nan_flag_is_refused_naming_the_flag(tmp_path):
    with pytest.raises(SettingsError, match=r"--budget-usd: expected a finite number"):
        load_settings(LimitFlags(budget_usd=float("nan")), tmp_path)


def test_flags_win_over_the_file_and_good_values_load(tmp_path):
    settings = load_settings(LimitFlags(max_tool_calls=7), toml(tmp_path, "[limits]\nmax_tool_calls = 3\nbudget_usd = 0.5\n"
                                                                  "[compaction]\nauto = false\nthreshold = 0.5\n"))
    assert (settings.max_tool_calls, settings.budget_usd) == (7, 0.5)
    assert settings.compaction.auto is False and settings.compaction.threshold == 0.5


def test_recorded_limits_are_only_tightened_by_the_file_and_widened_by_flags(tmp_path):
    recorded = {"budget_usd": 0.01, "max_tool_calls": 3, "daily_budget_usd": None, "max_calls_per_hour": None, "tool_timeout_s": 180.0}
    ws = toml(tmp_path, "[limits]\nmax_tool_calls = 100000\nbudget_usd = 1000\ntool_timeout_s = 5\n")
    settings = load_settings(LimitFlags(), ws, recorded)
    assert (settings.max_tool_calls, settings.budget_usd, settings.tool_timeout_s) == (3, 0.01, 5)
    widened = load_settings(LimitFlags(max_tool_calls=50), ws, recorded)
    assert widened.max_tool_calls == 50


@pytest.mark.parametrize("name,value,named", [
    ("CHRONICLE_HTTP_TIMEOUT_S", "abc", "CHRONICLE_HTTP_TIMEOUT_S='abc': expected a number of seconds above 0"),
    ("CHRONICLE_THINKING_TOKENS", "500", "CHRONICLE_THINKING_TOKENS='500': expected a whole number of tokens from 1024"),
    ("ANTHROPIC_BASE_URL", "notaurl", "ANTHROPIC_BASE_URL='notaurl': expected an http:// or https:// URL"),
    ("CHRONICLE_MAX_TOKENS", "0", "CHRONICLE_MAX_TOKENS: expected a number ≥ 1"),
    ("CHRONICLE_RETRY_CAP_S", "inf", "CHRONICLE_RETRY_CAP_S: expected a finite number"),
])
def test_a_bad_environment_variable_is_refused_naming_it(monkeypatch, name, value, named):
    monkeypatch.setenv(name, value)
    with pytest.raises(EnvironmentSettingError, match=named):
        environment()


def test_a_broken_prices_file_is_refused_when_the_environment_is_read(monkeypatch, tmp_path):
    path = tmp_path / "prices.json"
    path.write_text("{not json", encoding="utf-8")
    monkeypatch.setenv("CHRONICLE_PRICES", str(path))
    with pytest.raises(EnvironmentSettingError, match="not valid JSON"):
        environment()


def test_the_environment_is_read_afresh_when_a_variable_changes_and_a_copy_changed_by_a_caller_stays_its_own(monkeypatch):
    monkeypatch.setenv("CHRONICLE_MAX_ATTEMPTS", "3")
    first = environment()
    assert first.max_attempts == 3
    first.max_attempts = 99  # a caller's copy: the next read does not see it
    assert environment().max_attempts == 3
    monkeypatch.setenv("CHRONICLE_MAX_ATTEMPTS", "5")
    assert environment().max_attempts == 5
    monkeypatch.delenv("CHRONICLE_MAX_ATTEMPTS")
    assert environment().max_attempts is None
    monkeypatch.setenv("CHRONICLE_MAX_ATTEMPTS", "0")
    with pytest.raises(EnvironmentSettingError, match="CHRONICLE_MAX_ATTEMPTS"):
        environment()
