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


def test_an_agent_that_may_delegate_records_the_directory_of_whom_it_may_ask(tmp_path):
    (tmp_path / "chronicle.toml").write_text(
        '[agents.main]\n\n[agents.researcher]\ndescription = "Finds things in files."\ntools = ["read_file", "grep"]\n'
        '[agents.critic]\ndescription = "Reviews a change."\ntools = []\n', encoding="utf-8")
    spec = new_spec(tmp_path, provider="scripted:/x.json", today=date(2026, 3, 4))
    directory = spec.preamble.split("<available_agents>")[1]
    assert "- researcher: Finds things in files. [tools: read_file, grep]" in directory
    assert "- critic: Reviews a change. [tools: none]" in directory and "- main" not in directory
    assert "<available_agents>" in spec.system_prompt
    alone = tmp_path / "alone"
    alone.mkdir()
    assert "<available_agents>" not in new_spec(alone, provider="scripted:/x.json").preamble
