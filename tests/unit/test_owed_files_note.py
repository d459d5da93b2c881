"""What finishing an interrupted undo/redo --files says: one short line however many files it settled."""

from __future__ import annotations

from uuid import uuid4

from chronicle.runtime.files_owed import OwedFinished
from chronicle.runtime.undo_redo import REFUSED


def test_a_finish_of_300_files_is_summarised_and_names_the_command_that_lists_them_all():
    sid = uuid4()
    files = ([{"path": f"src/unchanged_{i:03}.py", "action": "unchanged"} for i in range(290)]
             + [{"path": f"src/restored_{i}.py", "action": "restored"} for i in range(7)]
             + [{"path": "gone.txt", "action": "deleted"}, {"path": "mine.txt", "action": REFUSED}, {"path": "x.py", "action": "restored"}])
    done = OwedFinished(sid, "undo", files, store_url=None)
    line = done.message
    assert len(line) < 400 and "\n" not in line, line
    assert "unchanged_" not in line
    assert "300 files: 290 unchanged, 8 restored, 1 deleted, 1 refused" in line
    assert f"{REFUSED}: mine.txt, restored: src/restored_0.py" in line  # a refused file first: it is the user's to look at
    assert ", 5 more)" in line
    assert line.endswith(f"`chronicle log {sid} --json` lists every file")
    assert done.files == files and done.refused == ["mine.txt"]  # every file kept for a program


def test_a_finish_of_a_few_files_names_each():
    sid = uuid4()
    files = [{"path": "win.txt", "action": "restored"}, {"path": "new.txt", "action": "deleted"}]
    assert OwedFinished(sid, "redo", files).message == (
        f"session {sid}: finished the files of an interrupted redo --files (restored: win.txt, deleted: new.txt)")
