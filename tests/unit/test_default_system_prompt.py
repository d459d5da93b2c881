"""The main agent gets a default system prompt (workspace, date, tools, relative paths), extended by its instructions."""

from __future__ import annotations

from datetime import date

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.app.specs import new_spec


def test_a_new_session_records_a_default_prompt_that_its_instructions_extend(tmp_path):
    (tmp_path / "chronicle.toml").write_text('[agents.main]\ninstructions = "You answer in French."\n', encoding="utf-8")
    spec = new_spec(tmp_path, provider="scripted:/x.json", today=date(2026, 3, 4))
    system = spec.system_prompt
    assert str(tmp_path) in system and "2026-03-04" in system and "relative" in system
    assert all(tool in system for tool in spec.tools)
    assert system.endswith("You answer in French.") and system.startswith(spec.preamble)


def test_sessions_recorded_before_the_preamble_ask_exactly_as_they_did():
    assert AgentSpec(instructions="Be brief.").system_prompt == "Be brief."
    assert AgentSpec().system_prompt == ""
