"""Agent(preamble=, bootstrap=, aux_model=) in code: what a session records, over chronicle.toml's [agent] and
[models] and CHRONICLE_AUX_MODEL; a value that cannot work is refused when the Agent is made."""

from __future__ import annotations

import json

import pytest

from chronicle import Agent, Chronicle
from tests.helpers import response, text


def script(path) -> str:
    path.write_text(json.dumps({"agents": {"main": [response(text("Ok."))]}, "title": ["Hi"]}), encoding="utf-8")
    return f"scripted:{path}"


def recorded_spec(app: Chronicle, session_id: str) -> dict:
    return next(e["data"]["spec"] for e in app.log(session_id) if e["event"] == "Started")


def test_code_turns_the_preamble_and_files_off_and_names_the_auxiliary_model(sqlite_url, workspace, tmp_path, monkeypatch):
    (workspace / "chronicle.toml").write_text('[models]\nauxiliary = "claude-3-5-haiku-latest"\n', encoding="utf-8")
    (workspace / "AGENTS.md").write_text("Cite file names.\n", encoding="utf-8")
    monkeypatch.setenv("CHRONICLE_AUX_MODEL", "claude-haiku-4-5")
    with Chronicle(sqlite_url) as app:
        bare = Agent(instructions="Be terse.", provider=script(tmp_path / "s.json"), preamble=False, bootstrap=False,
                     aux_model="claude-haiku-4-5-20251001")
        spec = recorded_spec(app, app.run_sync(bare, "hi", workspace=str(workspace)).session_id)
        assert (spec["preamble"], spec["aux_model"], spec["instructions"]) == ("", "claude-haiku-4-5-20251001", "Be terse.")
        assert "project_files" not in spec
        # Left unset in code: the environment, then the file, decide; the files are read by default.
        default = Agent(instructions="Be terse.", provider=script(tmp_path / "t.json"))
        spec = recorded_spec(app, app.run_sync(default, "hi", workspace=str(workspace)).session_id)
        assert spec["aux_model"] == "claude-haiku-4-5" and spec["preamble"].startswith("You are an agent")
        assert [f["name"] for f in spec["project_files"]] == ["AGENTS.md"]
        monkeypatch.delenv("CHRONICLE_AUX_MODEL")
        spec = recorded_spec(app, app.run_sync(default, "hi", workspace=str(workspace)).session_id)
        assert spec["aux_model"] == "claude-3-5-haiku-latest"


@pytest.mark.parametrize("kwargs, message", [
    ({"aux_model": " "}, "aux_model takes a model name"),
    ({"aux_model": 3}, "aux_model takes a model name"),
    ({"preamble": "no"}, "preamble takes True or False"),
])
def test_a_switch_that_cannot_work_is_refused_when_the_agent_is_made(kwargs, message):
    with pytest.raises(ValueError, match=message):
        Agent(**kwargs)
