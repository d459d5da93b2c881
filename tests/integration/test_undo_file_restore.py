"""`undo --files` restores exact bytes and acts on the path itself, never through a link (issue 17)."""

from __future__ import annotations

import os

import pytest

from chronicle.runtime.app.timetravel import redo as app_redo
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.timetravel import TimeTravelError
from chronicle.runtime.undo_redo import reapplied_rows, redo_with_files, undo
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


# -- redo --files: the inverse, from the same records ---------------------------------------------


def _events(h, name):  # type: ignore[no-untyped-def]
    return [e for _, e in h.store.events_with_positions([h.session_id]) if type(e).__name__ == name]


def test_redo_files_puts_back_exactly_what_the_turn_wrote_and_records_it(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "win.txt").write_bytes(b"one\r\ntwo\r\nthree")
    h = edit_turn(db_url, tmp_path, workspace)
    undo(h.store, h.session_id, 1, files=True, workspace=workspace)
    result = redo_with_files(h.store, h.session_id, workspace=workspace)
    assert {f.path: f.action for f in result.files} == {"win.txt": "reapplied", "new.txt": "reapplied"}
    assert (workspace / "win.txt").read_bytes() == b"uno\r\ndos\r\nthree"
    assert (workspace / "new.txt").read_bytes() == b"brand new\n"
    [reapplied] = _events(h, "FilesReapplied")
    assert reapplied.files == [{"path": "win.txt", "action": "reapplied"}, {"path": "new.txt", "action": "reapplied"}]
    assert h.store.session(h.session_id).head == result.turn_ids, "the turn is back on the branch"
    with ChronicleStore(db_url) as fresh:  # what another process reads from the events
        assert fresh.session(h.session_id).head == result.turn_ids and not fresh.session(h.session_id).redo_stack


def test_redo_files_refuses_a_file_changed_since_the_undo_and_records_nothing(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "win.txt").write_bytes(b"one\ntwo\n")
    h = edit_turn(db_url, tmp_path, workspace)
    undo(h.store, h.session_id, 1, files=True, workspace=workspace)
    (workspace / "win.txt").write_text("the user's own edit\n", encoding="utf-8")
    with pytest.raises(TimeTravelError, match=r"win.txt was changed after undo put it back.*redo --files refuses"):
        redo_with_files(h.store, h.session_id, workspace=workspace)
    assert (workspace / "win.txt").read_text(encoding="utf-8") == "the user's own edit\n"
    assert not (workspace / "new.txt").exists(), "nothing is written before every file was checked"
    assert not _events(h, "TurnsRedone") and not _events(h, "FilesReapplied")
    assert h.store.session(h.session_id).redo_stack, "the turns can still be redone"


def test_redo_files_refuses_a_symlink_put_in_place_of_a_file_and_never_writes_through_it(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "win.txt").write_bytes(b"one\ntwo\n")
    h = edit_turn(db_url, tmp_path, workspace)
    undo(h.store, h.session_id, 1, files=True, workspace=workspace)
    victim = tmp_path / "victim.txt"
    victim.write_text("not yours\n", encoding="utf-8")
    (workspace / "new.txt").symlink_to(victim)  # undo deleted new.txt; a link now stands in its place
    with pytest.raises(TimeTravelError, match="new.txt is now a symbolic link; redo --files acts on the path itself"):
        redo_with_files(h.store, h.session_id, workspace=workspace)
    assert victim.read_text(encoding="utf-8") == "not yours\n"
    assert (workspace / "win.txt").read_bytes() == b"one\ntwo\n"


def test_redo_files_makes_again_the_directories_undo_removed(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    h = Harness(db_url, workspace, tmp_path, [response(tool_use("a", "write_file", path="made/deep/a.txt", content="a\n")),
                                               response(text("done"))])
    assert h.run("write it").status == "completed"
    undo(h.store, h.session_id, 1, files=True, workspace=workspace)
    assert not (workspace / "made").exists()
    result = redo_with_files(h.store, h.session_id, workspace=workspace)
    assert (workspace / "made" / "deep" / "a.txt").read_text(encoding="utf-8") == "a\n"
    assert reapplied_rows(result.files) == [{"path": "made", "action": "created directory"},
                                            {"path": "made/deep", "action": "created directory"},
                                            {"path": "made/deep/a.txt", "action": "reapplied"}]


def test_a_plain_redo_names_the_files_still_as_undo_left_them(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "win.txt").write_bytes(b"one\ntwo\n")
    h = edit_turn(db_url, tmp_path, workspace)
    undo(h.store, h.session_id, 1, files=True, workspace=workspace)
    redone = app_redo(h.store, str(h.session_id), workspace=workspace)
    assert redone.left_undone == ["win.txt", "new.txt"]
    assert redone.warning and "undo" in redone.warning and "redo" in redone.warning and "--files" in redone.warning
    assert redone.row()["warning"] == redone.warning and redone.row()["files"] == []  # no files written, as a plain undo says
    undo(h.store, h.session_id, 1)  # the warning reads the workspace, which still holds the files as before the turn
    assert app_redo(h.store, str(h.session_id), workspace=workspace).left_undone == ["win.txt", "new.txt"]


def test_a_plain_redo_after_a_plain_undo_does_not_warn(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "win.txt").write_bytes(b"one\ntwo\n")
    h = edit_turn(db_url, tmp_path, workspace)
    undo(h.store, h.session_id, 1)
    redone = app_redo(h.store, str(h.session_id), workspace=workspace)
    assert redone.left_undone == [] and redone.warning is None and "warning" not in redone.row()


class TurnArrivesBeforeTheUndoIsRecorded(ChronicleStore):
    """A store on which another process runs a turn of the session between undo's look at the branch and its
    first write: a queued input that a worker picked up while `undo --files` checked the files."""

    name = ChronicleStore.name  # eventsourcing names an application's tables after its class otherwise

    def __init__(self, url: str, arrive) -> None:  # type: ignore[no-untyped-def]
        super().__init__(url)
        self.arrive, self.arrived = arrive, False

    def update_session(self, session_id, command, *others, **kwargs):  # type: ignore[no-untyped-def]
        if not self.arrived:
            self.arrived = True
            self.arrive()
        return super().update_session(session_id, command, *others, **kwargs)


def test_undo_files_refused_by_a_turn_arriving_meanwhile_leaves_the_files_and_undo_again_takes_that_turn(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    h = Harness(db_url, workspace, tmp_path, [  # one list per turn
        [response(tool_use("a", "write_file", path="first.txt", content="first\n")), response(text("one"))],
        [response(tool_use("b", "write_file", path="second.txt", content="second\n")), response(text("two"))],
    ])
    assert h.run("first").status == "completed"
    [first] = h.store.session(h.session_id).head
    store = TurnArrivesBeforeTheUndoIsRecorded(db_url, lambda: h.run("second"))
    with pytest.raises(TimeTravelError, match="changed while undoing"):
        undo(store, h.session_id, 1, files=True, workspace=workspace)
    assert store.arrived
    # Nothing was undone, so nothing was put back: the first turn's file stays as it left it (it was deleted first).
    assert (workspace / "first.txt").read_text(encoding="utf-8") == "first\n"
    assert (workspace / "second.txt").read_text(encoding="utf-8") == "second\n"
    session = store.session(h.session_id)
    assert len(session.head) == 2 and session.head[0] == first and not session.redo_stack
    again = undo(store, h.session_id, 1, files=True, workspace=workspace)  # "run undo again": the newest turn, files and all
    assert again.turn_ids == [session.head[1]] and {f.path: f.action for f in again.files} == {"second.txt": "deleted"}
    assert not (workspace / "second.txt").exists() and (workspace / "first.txt").exists()
    assert store.session(h.session_id).head == [first]
    store.close()
