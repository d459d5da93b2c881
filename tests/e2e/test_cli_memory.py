"""MEMORY.md in the system prompt as recorded at session start, and MoveToWorkspace compaction writing the
compacted turns to memory/DATE.md, through the real CLI on both backends."""

from __future__ import annotations

from pathlib import Path

from chronicle.runtime.agents.registry import AgentRegistry
from tests.helpers import cli, json_lines, response, text, tool_use, write_script


def test_memory_md_is_recorded_on_the_spec_and_goes_into_the_system_prompt(workspace):
    (workspace / "MEMORY.md").write_text("The user prefers tabs.\n", encoding="utf-8")
    spec = AgentRegistry().main_spec(provider="scripted:x", model="scripted", workspace=str(workspace))
    assert spec.memory == "The user prefers tabs."
    assert "<memory>\nThe user prefers tabs.\n</memory>" in spec.system_prompt
    (workspace / "MEMORY.md").unlink()
    assert AgentRegistry().main_spec(provider="scripted:x", model="scripted", workspace=str(workspace)).system_prompt == ""


def test_replay_stays_identical_after_memory_md_changes(db_url, workspace, tmp_path):
    (workspace / "MEMORY.md").write_text("Remember: answer briefly.\n", encoding="utf-8")
    script = write_script(tmp_path / "s.json", [response(text("Brief."))])
    run = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    sid = json_lines(run.stdout)[0]["session_id"]
    (workspace / "MEMORY.md").write_text("Something else entirely.\n", encoding="utf-8")
    replay = cli("replay", sid, "--json", db=db_url)
    assert replay.returncode == 0 and json_lines(replay.stdout)[0]["identical"] is True


def test_workspace_compaction_moves_older_turns_to_a_dated_file_and_leaves_a_pointer(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [
        [response(tool_use("t1", "read_file", path="hello.txt")), response(text("It says hello world."))],
        [response(text("Second answer."))],
    ])
    first = cli("run", "read hello", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    sid = json_lines(first.stdout)[0]["session_id"]
    assert cli("run", "again", "--session", sid, "--json", db=db_url).returncode == 0
    compacted = cli("compact", sid, "--keep", "1", "--strategy", "workspace", "--json", db=db_url)
    assert compacted.returncode == 0, compacted.stderr
    result = json_lines(compacted.stdout)[0]
    assert result["ok"] is True and result["turns_compacted"] == 1
    [log_file] = list((workspace / "memory").glob("*.md"))
    moved = log_file.read_text(encoding="utf-8")
    assert "### Turn 1 (completed)" in moved and "**user:** read hello" in moved and "It says hello world." in moved
    assert f"memory/{log_file.name}" in result["summary"]
    history = json_lines(cli("history", sid, "--json", db=db_url).stdout)
    assert f"memory/{log_file.name}" in history[0]["content"][0]["text"] and "read hello" not in str(history)
    assert any(e["event"] == "Compacted" and e["data"]["strategy"] == "workspace" for e in json_lines(cli("log", sid, "--json", db=db_url).stdout))
    assert Path(log_file).parent.name == "memory"


def test_each_model_call_is_followed_by_a_progress_event_counted_from_the_stored_turn(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "p.json", [
        response(tool_use("t1", "read_file", path="hello.txt"), tool_use("t2", "list_dir", path="."), usage=(100, 10)),
        response(text("done"), usage=(150, 5)),
    ])
    run = cli("run", "look", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    assert run.returncode == 0, run.stderr
    progress = [e for e in json_lines(run.stdout) if e["type"] == "progress"]
    assert [(p["iteration"], p["tools_run"], p["input_tokens"], p["output_tokens"]) for p in progress] == [(1, 0, 100, 10), (2, 2, 250, 15)]
    assert progress[0]["max_iterations"] == 20 and progress[-1]["turn"] == 1
