"""The agent registry file: what it accepts, what it refuses (naming the key), how specs resolve."""

from __future__ import annotations

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.agents.registry import (
    AgentRegistry,
    RegistryError,
    child_spec,
    find_registry,
    load_registry,
    targets,
)
from chronicle.runtime.tools import DEFAULT_TOOLS, READ_ONLY_TOOLS


def registry_from(tmp_path, text: str) -> AgentRegistry:
    path = tmp_path / "chronicle.toml"
    path.write_text(text, encoding="utf-8")
    return load_registry(path)


def refusal(tmp_path, text: str) -> str:
    with pytest.raises(RegistryError) as caught:
        registry_from(tmp_path, text)
    return str(caught.value)


def test_sub_agents_default_to_read_only_tools_and_main_to_all_tools(tmp_path):
    registry = registry_from(tmp_path, '[agents.researcher]\ndescription = "reads"\n')
    assert registry.main.tools == DEFAULT_TOOLS
    assert registry.agents[0].tools == READ_ONLY_TOOLS == ("read_file", "list_dir", "glob", "grep")


def test_main_gets_delegation_tools_only_when_other_agents_exist():
    assert "delegate" not in AgentRegistry().main_spec("p", "m", "/w").tools
    registry = AgentRegistry(agents=(AgentSpec(name="researcher", tools=READ_ONLY_TOOLS),))
    spec = registry.main_spec("p", "m", "/w")
    assert spec.tools[-3:] == ("list_agents", "delegate", "list_tasks") and "task_complete" not in spec.tools
    assert [a.name for a in spec.registry] == ["researcher"]


def test_main_configured_in_the_file_keeps_its_tools_and_limits(tmp_path):
    registry = registry_from(tmp_path, '[agents.main]\ntools = ["read_file"]\nmax_iterations = 7\nmax_depth = 0\n[agents.r]\n')
    spec = registry.main_spec("p", "m", "/w")
    assert spec.tools == ("read_file",) and spec.max_iterations == 7, "max_depth 0: main may not delegate"
    assert registry.main_spec("p", "m", "/w", max_iterations=3).max_iterations == 3


def test_a_child_sits_one_level_down_with_task_complete_and_no_delegation_at_the_limit():
    parent = AgentRegistry(agents=(AgentSpec(name="r", tools=("grep",)), AgentSpec(name="s"))).main_spec("p", "m", "/w")
    child = child_spec(parent, parent.registry[0])
    assert (child.depth, child.max_depth, child.model, child.provider) == (1, 1, "m", "p")
    assert child.tools == ("grep", "task_complete") and child.registry == ()


def test_a_child_never_gets_a_deeper_limit_than_its_parent():
    deep = AgentSpec(name="planner", max_depth=3)
    shallow_parent = AgentRegistry(agents=(deep, AgentSpec(name="r"))).main_spec("p", "m", "/w")
    assert "delegate" not in child_spec(shallow_parent, deep).tools
    deep_parent = shallow_parent.model_copy(update={"max_depth": 3})
    planner = child_spec(deep_parent, deep)
    assert planner.max_depth == 3 and "delegate" in planner.tools
    assert [a.name for a in targets(planner)] == ["r"], "no self-delegation, never main"


def test_unknown_keys_are_refused_naming_the_key(tmp_path):
    assert "agents.r.toolz: unknown key" in refusal(tmp_path, "[agents.r]\ntoolz = []\n")
    assert "agentz: unknown top-level key" in refusal(tmp_path, "[agentz.r]\n")


def test_bad_values_are_refused_naming_the_key(tmp_path):
    assert "agents.r.max_depth" in refusal(tmp_path, "[agents.r]\nmax_depth = -1\n")
    assert "agents.r.max_iterations" in refusal(tmp_path, '[agents.r]\nmax_iterations = "many"\n')
    message = refusal(tmp_path, '[agents.r]\ntools = ["delegate"]\n')
    assert "agents.r.tools" in message and "added by Chronicle" in message
    assert "agents.9lives" in refusal(tmp_path, "[agents.9lives]\n")
    assert "not valid TOML" in refusal(tmp_path, "[agents.r\n")


def test_no_file_in_the_workspace_means_main_alone_but_a_named_file_must_exist(tmp_path):
    assert find_registry(None, tmp_path).agents == ()
    with pytest.raises(RegistryError, match="not found"):
        find_registry(tmp_path / "nope.toml", tmp_path)


def test_specs_recorded_before_sub_agents_still_load():
    old = {"name": "main", "description": "", "instructions": "", "provider": "p", "model": "m", "tools": ["read_file"],
           "max_iterations": 20, "max_depth": 1, "depth": 0, "workspace": "/w"}
    spec = AgentSpec.model_validate(old)
    assert spec.registry == () and spec.may_delegate
