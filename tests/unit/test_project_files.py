"""Which workspace files a new spec records and which a sub-agent is given, and where [agent] is read from."""

from __future__ import annotations

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.project_file import ProjectFile
from chronicle.runtime.agents.registry import child_spec
from chronicle.runtime.app.errors import AppError
from chronicle.runtime.app.specs import new_spec

PROVIDER = "scripted:/x.json"


def test_a_link_out_of_the_workspace_is_refused_and_an_empty_file_is_not_recorded(tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (tmp_path / "secret.txt").write_text("not the project's\n", encoding="utf-8")
    (workspace / "AGENTS.md").symlink_to(tmp_path / "secret.txt")
    with pytest.raises(AppError, match="AGENTS.md leads outside the workspace") as refused:
        new_spec(workspace, provider=PROVIDER)
    assert refused.value.code == 2
    (workspace / "AGENTS.md").unlink()
    (workspace / "docs").mkdir()
    (workspace / "docs" / "agents.md").write_text("Inside is fine.\n", encoding="utf-8")
    (workspace / "AGENTS.md").symlink_to(workspace / "docs" / "agents.md")
    (workspace / "TOOLS.md").write_text("\n  \n", encoding="utf-8")
    spec = new_spec(workspace, provider=PROVIDER)
    assert [(f.name, f.text) for f in spec.project_files] == [("AGENTS.md", "Inside is fine.")]


def test_a_sub_agent_is_given_its_parents_recorded_agents_md_and_tools_md_only():
    parent = AgentSpec(name="main", memory="Ada", preamble="You are an agent", aux_model="claude-haiku-4-5", project_files=(
        ProjectFile(name="AGENTS.md", text="a"), ProjectFile(name="SOUL.md", text="s"), ProjectFile(name="TOOLS.md", text="t")))
    child = child_spec(parent, AgentSpec(name="researcher", instructions="Read."))
    assert [f.name for f in child.project_files] == ["AGENTS.md", "TOOLS.md"]
    assert (child.memory, child.preamble, child.aux_model) == ("", "", "claude-haiku-4-5")
    assert child.system_prompt.startswith("Read.\n\n<project_context>")


def test_the_switches_are_read_from_the_agents_file_the_session_is_specified_by(tmp_path):
    (tmp_path / "team.toml").write_text('[agent]\npreamble = false\n\n[models]\nauxiliary = "claude-haiku-4-5"\n', encoding="utf-8")
    spec = new_spec(tmp_path, provider=PROVIDER, agents=tmp_path / "team.toml")
    assert (spec.preamble, spec.aux_model) == ("", "claude-haiku-4-5")
    assert new_spec(tmp_path, provider=PROVIDER).preamble.startswith("You are an agent")
