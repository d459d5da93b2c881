"""Seed 004's behavioural hints: the default system prompt's <behavioral_constraints> (how to work: read before
answering, adapt to a failed call, end with a summary), apart from its facts (workspace, date, tools), and
switched off on their own by `[agent] behavioral_hints = false` or `Agent(behavioral_hints=False)`. Recorded
with the session's preamble, so a later change to the file never changes a session already started."""

from __future__ import annotations

import json
from uuid import UUID

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from tests.helpers import cli, json_lines, response, text, write_script


def _prompt(app: Chronicle, sid: str) -> str:
    return app.store.session(UUID(sid)).spec.system_prompt


def test_the_hints_are_on_by_default_and_off_in_code_or_in_the_file_with_the_facts_kept(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(text("ok"))]] * 4)
    with Chronicle(db_url) as app:
        default = app.run_sync(Agent(provider=f"scripted:{script}"), "hi", workspace=workspace).session_id
        off = app.run_sync(Agent(provider=f"scripted:{script}", behavioral_hints=False), "hi", workspace=workspace).session_id
        assert "<behavioral_constraints>" in _prompt(app, default) and "read a file before you edit it" in _prompt(app, default)
        assert "<behavioral_constraints>" not in _prompt(app, off) and "read a file before you edit it" not in _prompt(app, off)
        assert "Today's date" in _prompt(app, off) and str(workspace) in _prompt(app, off)
        (workspace / "chronicle.toml").write_text("[agent]\nbehavioral_hints = false\n", encoding="utf-8")
        from_file = app.run_sync(Agent(provider=f"scripted:{script}"), "hi", workspace=workspace).session_id
        assert "<behavioral_constraints>" not in _prompt(app, from_file)
        code_wins = app.run_sync(Agent(provider=f"scripted:{script}", behavioral_hints=True), "hi", workspace=workspace).session_id
        assert "<behavioral_constraints>" in _prompt(app, code_wins)
        assert "<behavioral_constraints>" in _prompt(app, default)  # recorded: the file's change came after it started


def test_the_cli_reads_the_switch_from_the_file_and_refuses_one_that_is_not_a_bool(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(text("ok"))]])
    (workspace / "chronicle.toml").write_text("[agent]\nbehavioral_hints = false\n", encoding="utf-8")
    done = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    sid = json_lines(done.stdout)[0]["session_id"]
    started = [e for e in json_lines(cli("log", sid, "--json", db=db_url).stdout) if e["event"] == "Started"][0]
    assert "<behavioral_constraints>" not in json.dumps(started) and "Today's date" in json.dumps(started)
    (workspace / "chronicle.toml").write_text('[agent]\nbehavioral_hints = "no"\n', encoding="utf-8")
    refused = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert refused.returncode == 2 and "behavioral_hints" in refused.stderr, refused.stderr
    with pytest.raises(ChronicleError) as wrong:
        with Chronicle(db_url) as app:
            app.run_sync(Agent(provider=f"scripted:{script}", behavioral_hints="no"), "hi", workspace=workspace)  # type: ignore[arg-type]
    assert wrong.value.code == 2 and "behavioral_hints" in str(wrong.value)
