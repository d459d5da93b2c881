"""undo/redo --files of a turn that delegated: what its sub-agents wrote (nested ones too) is the turn's, put back
and re-applied with the parent's own writes, through the real CLI on both backends."""

from __future__ import annotations

import json
from pathlib import Path

from chronicle.runtime.app.timetravel import undo as app_undo
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, json_lines, response, text, tool_use

AGENTS = """
[agents.main]
instructions = "You lead."
max_depth = 2

[agents.writer]
description = "writes files"
instructions = "Write files."
tools = ["read_file", "write_file", "edit_file", "bash"]
max_depth = 2

[agents.helper]
description = "helps the writer"
instructions = "Help."
tools = ["write_file", "edit_file"]
max_depth = 2
"""


def delegating_script(path: Path) -> Path:
    main = [
        [response(tool_use("w1", "write_file", path="a.txt", content="alpha\n")), response(text("t1 done"))],
        [response(tool_use("d1", "delegate", tasks=[{"agent": "writer", "task": "write the sub file"}])), response(text("t2 done"))],
    ]
    writer = [
        response(tool_use("s1", "write_file", path="sub.txt", content="from sub\n")),
        response(tool_use("s2", "edit_file", path="a.txt", old="alpha", new="ALPHA")),
        response(tool_use("s3", "bash", command="true")),
        response(tool_use("s4", "delegate", tasks=[{"agent": "helper", "task": "help with the deep file"}])),
        response(tool_use("s5", "task_complete", status="completed", summary="wrote", files_modified=["sub.txt", "a.txt"])),
    ]
    helper = [
        response(tool_use("h1", "write_file", path="deep/er/h.txt", content="helper\n")),
        response(tool_use("h2", "edit_file", path="a.txt", old="ALPHA", new="ALPHA-h")),
        response(tool_use("h3", "task_complete", status="completed", summary="helped")),
    ]
    path.write_text(json.dumps({"agents": {"main": main, "writer": writer, "helper": helper}}), encoding="utf-8")
    return path


def two_turns(db: str, tmp_path: Path) -> tuple[str, Path]:
    ws = tmp_path / "ws"
    ws.mkdir()
    agents = tmp_path / "agents.toml"
    agents.write_text(AGENTS, encoding="utf-8")
    args = ("--provider", f"scripted:{delegating_script(tmp_path / 's.json')}", "--workspace", str(ws), "--agents", str(agents), "--yes")
    first = cli("run", "one", *args, "--json", db=db)
    assert first.returncode == 0, first.stderr
    sid = json_lines(first.stdout)[0]["session_id"]
    second = cli("run", "two", "--session", sid, *args, db=db)
    assert second.returncode == 0, second.stderr
    assert (ws / "a.txt").read_text() == "ALPHA-h\n" and (ws / "sub.txt").exists() and (ws / "deep/er/h.txt").exists()
    return sid, ws


def test_undo_files_puts_back_what_the_sub_agents_of_the_turn_wrote_and_redo_files_writes_it_again(db_url, tmp_path):
    sid, ws = two_turns(db_url, tmp_path)
    undone = cli("undo", sid, "--files", "--json", db=db_url)
    assert undone.returncode == 0, undone.stderr
    rows = json_lines(undone.stdout)[0]["files"]
    assert rows == [{"path": "sub.txt", "action": "deleted"}, {"path": "a.txt", "action": "restored"},
                    {"path": "deep/er/h.txt", "action": "deleted"},
                    {"path": "deep/er", "action": "removed directory"}, {"path": "deep", "action": "removed directory"}]
    assert (ws / "a.txt").read_text() == "alpha\n", "as before the turn, not as its sub-agents left it"
    assert sorted(p.name for p in ws.iterdir()) == ["a.txt"]
    assert "1 `bash` command(s)" in undone.stderr, "the sub-agent's bash call is counted"

    redone = cli("redo", sid, "--files", "--json", db=db_url)
    assert redone.returncode == 0, redone.stderr
    assert {r["path"]: r["action"] for r in json_lines(redone.stdout)[0]["files"]}["deep/er/h.txt"] == "reapplied"
    assert (ws / "a.txt").read_text() == "ALPHA-h\n" and (ws / "sub.txt").read_text() == "from sub\n"
    assert (ws / "deep/er/h.txt").read_text() == "helper\n"

    # the library reads the same files as the CLI's --json
    with ChronicleStore(db_url) as store:
        library = app_undo(store, sid, files=True)
    assert library.files == rows
    assert (ws / "a.txt").read_text() == "alpha\n"


def test_a_file_a_sub_agent_wrote_and_someone_changed_since_refuses_the_undo_naming_it(db_url, tmp_path):
    sid, ws = two_turns(db_url, tmp_path)
    (ws / "deep/er/h.txt").write_text("the user's own\n", encoding="utf-8")
    refused = cli("undo", sid, "--files", db=db_url)
    assert refused.returncode == 1
    assert "deep/er/h.txt was changed after turn 2 wrote it" in refused.stderr
    assert (ws / "a.txt").read_text() == "ALPHA-h\n" and (ws / "sub.txt").exists(), "nothing written before every file was checked"
    undo_again = cli("undo", sid, "--files", "--turns", "1", db=db_url)
    assert undo_again.returncode == 1, "still refused: the undo was not recorded"
