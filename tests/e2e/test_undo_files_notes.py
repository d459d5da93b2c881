"""What undo/redo --files say beside the files: bash commands that ran (not those that never did), and a plain redo's
warning about files an `undo --files --workspace DIR` left undone elsewhere than the session's workspace."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tests.helpers import cli, json_lines, response, text, tool_use


def script(path: Path, turn: list[dict]) -> Path:
    path.write_text(json.dumps({"agents": {"main": [turn]}}), encoding="utf-8")
    return path


def test_a_bash_call_cancelled_while_it_awaited_approval_is_not_counted_as_run(db_url, workspace, tmp_path):
    s = script(tmp_path / "s.json", [response(tool_use("w1", "write_file", path="n.txt", content="v1")),
                                     response(tool_use("b1", "bash", command="echo x > made.txt")), response(text("done"))])
    paused = cli("run", "go", "--provider", f"scripted:{s}", "--workspace", str(workspace), "--json", db=db_url, input="")
    assert paused.returncode == 3, paused.stderr
    sid = json_lines(paused.stdout)[0]["session_id"]
    assert cli("cancel", sid, db=db_url).returncode == 0
    undone = cli("undo", sid, "--files", db=db_url)
    assert undone.returncode == 0, undone.stderr
    assert "deleted: n.txt" in undone.stdout and not (workspace / "made.txt").exists()
    assert "bash" not in undone.stderr, "the bash command never ran: nothing is left unreverted"


def test_a_plain_redo_warns_of_files_an_undo_put_back_in_another_workspace(db_url, workspace, tmp_path):
    s = script(tmp_path / "s.json", [response(tool_use("w1", "write_file", path="n.txt", content="v1")), response(text("done"))])
    ran = cli("run", "go", "--provider", f"scripted:{s}", "--workspace", str(workspace), "--yes", "--json", db=db_url)
    assert ran.returncode == 0, ran.stderr
    sid = json_lines(ran.stdout)[0]["session_id"]
    moved = tmp_path / "moved"
    shutil.copytree(workspace, moved)  # the session's files, now elsewhere
    undone = cli("undo", sid, "--files", "--workspace", str(moved), db=db_url)
    assert undone.returncode == 0, undone.stderr
    assert not (moved / "n.txt").exists() and (workspace / "n.txt").exists()
    redone = cli("redo", sid, "--json", db=db_url)
    assert redone.returncode == 0, redone.stderr
    assert "still as undo --files left them (n.txt)" in json_lines(redone.stdout)[0]["warning"]
    assert "warning: the redone turns changed files" in redone.stderr
