"""The commands time travel's refusals offer name the store when a plain one would open another (runtime/pasteable.py)."""

from __future__ import annotations

import shlex

from tests.helpers import cli, json_lines, response, text, tool_use, write_script
from tests.integration.test_undo_files_crash import interrupted_undo


def test_redo_refused_for_owed_files_offers_a_resume_of_this_store(sqlite_url, tmp_path):
    workspace, sid = interrupted_undo(sqlite_url, tmp_path)
    refused = cli("--db", sqlite_url, "redo", sid, cwd=tmp_path)
    assert refused.returncode == 1, refused.stderr
    assert f"`chronicle --db {shlex.quote(sqlite_url)} resume {sid}` finishes that before redo" in refused.stderr, refused.stderr
    plain = cli("redo", sid, db=sqlite_url, cwd=tmp_path)  # CHRONICLE_DB names it: a plain paste opens it
    assert f"`chronicle resume {sid}` finishes that before redo" in plain.stderr, plain.stderr


def test_history_at_a_turn_not_ended_offers_a_resume_of_this_store(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(tool_use("tu_1", "bash", command="echo hi")), response(text("done"))])
    paused = cli("run", "shell please", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    assert paused.returncode == 3, paused.stderr
    sid = json_lines(paused.stdout)[0]["session_id"]
    refused = cli("--db", sqlite_url, "history", sid, "--at", "1", cwd=tmp_path)
    assert refused.returncode != 0, refused.stdout
    assert f"`chronicle --db {shlex.quote(sqlite_url)} resume {sid}` may finish it" in refused.stderr, refused.stderr
