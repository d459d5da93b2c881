"""`undo --files` restores exact bytes and acts on the path itself, never through a link (issue 17)."""

from __future__ import annotations

import os

import pytest

from chronicle.runtime.timetravel import TimeTravelError, undo
from tests.helpers import response, text, tool_use
from tests.integration.loop_harness import Harness


def edit_turn(db_url, tmp_path, workspace):  # type: ignore[no-untyped-def]
    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("a", "edit_file", path="win.txt", old="one\ntwo", new="uno\ndos"),
                 tool_use("b", "write_file", path="new.txt", content="brand new\n")),
        response(text("done")),
    ])
    assert h.run("edit it").status == "completed"
    return h


def test_undo_files_puts_back_the_exact_bytes_of_a_crlf_file(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    original = b"one\r\ntwo\r\nthree"
    (workspace / "win.txt").write_bytes(original)
    h = edit_turn(db_url, tmp_path, workspace)
    assert (workspace / "win.txt").read_bytes() == b"uno\r\ndos\r\nthree"
    result = undo(h.store, h.session_id, 1, files=True, workspace=workspace)
    assert {f.path: f.action for f in result.files} == {"win.txt": "restored", "new.txt": "deleted"}
    assert (workspace / "win.txt").read_bytes() == original
    assert not (workspace / "new.txt").exists()


def test_undo_files_refuses_a_symlink_that_replaced_a_written_file(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "win.txt").write_bytes(b"one\ntwo\n")
    h = edit_turn(db_url, tmp_path, workspace)
    victim = workspace / "keep.txt"  # inside the workspace, so confinement alone does not stop it
    victim.write_text("brand new\n", encoding="utf-8")  # same content as the turn wrote: a naive check passes
    (workspace / "new.txt").unlink()
    (workspace / "new.txt").symlink_to(victim)
    with pytest.raises(TimeTravelError, match="symbolic link"):
        undo(h.store, h.session_id, 1, files=True, workspace=workspace)
    assert victim.read_text(encoding="utf-8") == "brand new\n"
    assert (workspace / "win.txt").read_bytes() == b"uno\ndos\n"  # nothing written before every file was checked


def test_undo_files_through_a_hard_link_changes_only_the_path_itself(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "win.txt").write_bytes(b"one\ntwo\n")
    h = edit_turn(db_url, tmp_path, workspace)
    other = tmp_path / "other.txt"
    os.link(workspace / "win.txt", other)  # another name for the edited file, outside the workspace
    undo(h.store, h.session_id, 1, files=True, workspace=workspace)
    assert (workspace / "win.txt").read_bytes() == b"one\ntwo\n"
    assert other.read_bytes() == b"uno\ndos\n"


def test_undo_files_removes_the_directories_a_write_created_only_while_they_are_empty(db_url, tmp_path):
    workspace = tmp_path / "ws"
    (workspace / "src").mkdir(parents=True)
    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("a", "write_file", path="src/made/deep/a.txt", content="a\n"),
                 tool_use("b", "write_file", path="kept/b.txt", content="b\n")),
        response(text("done")),
    ])
    assert h.run("write them").status == "completed"
    (workspace / "kept" / "mine.txt").write_text("the user's own file\n", encoding="utf-8")
    result = undo(h.store, h.session_id, 1, files=True, workspace=workspace)
    assert {f.path: f.removed_dirs for f in result.files} == {"src/made/deep/a.txt": ["src/made/deep", "src/made"], "kept/b.txt": []}
    assert sorted(p.name for p in workspace.iterdir()) == ["kept", "src"]  # src was there before: it stays
    assert list((workspace / "src").iterdir()) == []
    assert (workspace / "kept" / "mine.txt").exists()
    restored = [e for _, e in h.store.events_with_positions([h.session_id]) if type(e).__name__ == "FilesRestored"]
    assert {"path": "src/made", "action": "removed directory"} in restored[0].files
