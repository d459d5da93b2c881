"""MEMORY.md in the system prompt as recorded at session start, and MoveToWorkspace compaction writing the
compacted turns to memory/DATE.md, through the real CLI on both backends."""

from __future__ import annotations

import json
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


def _three_turns_with_summaries(db_url, workspace, tmp_path, *summaries):  # type: ignore[no-untyped-def]
    (workspace / "a.txt").write_text("hi\n", encoding="utf-8")
    path = tmp_path / "three.json"
    path.write_text(json.dumps({"agents": {"main": [
        [response(tool_use("t1", "read_file", path="a.txt")), response(text("one"))],
        [response(text("two"))],
        [response(tool_use("t3", "read_file", path="a.txt")), response(text("three"))],
    ]}, "summary": [response(text(s)) for s in summaries]}), encoding="utf-8")
    first = cli("run", "first", "--provider", f"scripted:{path}", "--workspace", str(workspace), "--json", db=db_url)
    sid = json_lines(first.stdout)[0]["session_id"]
    for prompt in ("second", "third"):
        assert cli("run", prompt, "--session", sid, "--json", db=db_url).returncode == 0
    return sid


def _compact(sid, db_url, *args):  # type: ignore[no-untyped-def]
    done = cli("compact", sid, *args, "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    return json_lines(done.stdout)[0]


def _read_first(sid, db_url) -> str:  # type: ignore[no-untyped-def]
    """The text the model reads first: the compaction's, as history shows what it reads next."""
    return json_lines(cli("history", sid, "--json", db=db_url).stdout)[0]["content"][0]["text"]


def test_a_move_after_a_summary_names_the_turns_in_the_file_and_keeps_the_summary_for_the_others(db_url, workspace, tmp_path):
    sid = _three_turns_with_summaries(db_url, workspace, tmp_path, "SUMMARY of turns one and two")
    assert _compact(sid, db_url, "--keep", "1")["turns_compacted"] == 2
    moved = _compact(sid, db_url, "--strategy", "workspace", "--keep", "0")
    assert moved["turns_compacted"] == 1
    [log_file] = list((workspace / "memory").glob("*.md"))
    written = log_file.read_text(encoding="utf-8")
    assert "1 turn(s) moved here" in written and "### Turn 3 (completed)" in written and "### Turn 1" not in written
    assert '- tool `read_file` {"path": "a.txt"}' in written  # JSON, not Python's repr {'path': 'a.txt'}
    relative = f"memory/{log_file.name}"
    # Said "3 earlier turn(s) ... were moved to" the file, which holds only turn 3.
    assert moved["summary"] == (
        f"Turn 3 of this conversation was moved to the workspace file {relative}; read it with read_file if you need it. "
        "The 2 earlier turn(s) are not in that file; what is kept of them follows.\n\nSUMMARY of turns one and two")
    assert _read_first(sid, db_url) == f"Summary of the conversation so far:\n{moved['summary']}"


def test_a_summary_after_a_move_keeps_saying_where_the_moved_turns_are(db_url, workspace, tmp_path):
    # The scripted summaries are numbered by the session's compactions: the move was the first.
    sid = _three_turns_with_summaries(db_url, workspace, tmp_path, "not asked", "SUMMARY that forgets the file")
    moved = _compact(sid, db_url, "--strategy", "workspace", "--keep", "1")
    [log_file] = list((workspace / "memory").glob("*.md"))
    line = (f"Turns 1–2 of this conversation were moved to the workspace file memory/{log_file.name}; "
            "read it with read_file if you need them.")
    assert moved["summary"] == line
    summarised = _compact(sid, db_url, "--keep", "0")
    assert summarised["summary"] == (
        "SUMMARY that forgets the file\n\nSome of the turns summarised here are also kept whole in the workspace:\n" + line)
    assert line in _read_first(sid, db_url)


def test_a_move_after_a_truncation_says_the_earlier_turns_are_nowhere_in_the_file(db_url, workspace, tmp_path):
    sid = _three_turns_with_summaries(db_url, workspace, tmp_path)
    assert _compact(sid, db_url, "--strategy", "truncate", "--keep", "1")["summary"] is None
    moved = _compact(sid, db_url, "--strategy", "workspace", "--keep", "0")
    [log_file] = list((workspace / "memory").glob("*.md"))
    assert moved["summary"] == (
        f"Turn 3 of this conversation was moved to the workspace file memory/{log_file.name}; read it with read_file if "
        "you need it. The 2 earlier turn(s) are not in that file: they were left out of the context.")


def test_two_moves_to_the_same_file_each_name_their_own_turns(db_url, workspace, tmp_path):
    sid = _three_turns_with_summaries(db_url, workspace, tmp_path)
    first = _compact(sid, db_url, "--strategy", "workspace", "--keep", "2")
    second = _compact(sid, db_url, "--strategy", "workspace", "--keep", "1")
    [log_file] = list((workspace / "memory").glob("*.md"))
    relative = f"memory/{log_file.name}"
    assert first["summary"] == f"Turn 1 of this conversation was moved to the workspace file {relative}; read it with read_file if you need it."
    # Both are in that file: "not in that file" would be wrong about turn 1.
    assert second["summary"] == (
        f"Turn 2 of this conversation was moved to the workspace file {relative}; read it with read_file if you need it. "
        f"The 1 earlier turn(s) were compacted before; what is kept of them follows.\n\n{first['summary']}")
    written = log_file.read_text(encoding="utf-8")
    assert written.count("1 turn(s) moved here") == 2 and "### Turn 3" not in written
