"""An undo/redo --files killed between its record and its file writes is finished by resume, doctor or the next undo.

The process is stopped at the test-only gate undo_redo.TEST_HALT_ENV (it touches a file, then waits)
and killed with SIGKILL there, so the store holds TurnsUndone/TurnsRedone saying the files are owed
and no FilesRestored/FilesReapplied, and the workspace is as the turn left it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import closing
from pathlib import Path
from uuid import UUID

from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.undo_redo import REFUSED, TEST_HALT_ENV, FileRestore, checked_restore, undo, write_restored
from tests import processes
from tests.helpers import cli
from tests.integration.test_undo_file_restore import edit_turn
from tests.recovery import wait_for

EDITED = b"uno\ndos\n"


def killed_at_the_gate(db_url: str, tmp_path: Path, *args: str) -> None:
    gate = tmp_path / "gate"
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env.update({"CHRONICLE_DB": db_url, TEST_HALT_ENV: str(gate)})
    process = processes.start([sys.executable, "-m", "chronicle.runtime.cli", *args], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: gate.exists() or process.poll() is not None, timeout=60)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=10)
    assert process.returncode == -signal.SIGKILL, process.stderr.read() if process.stderr else ""


def session_events(db_url: str, sid: object, name: str) -> list[object]:
    with closing(ChronicleStore(db_url)) as store:
        return [e for _, e in store.events_with_positions([UUID(str(sid))]) if type(e).__name__ == name]


def owed(db_url: str, sid: object) -> object:
    with closing(ChronicleStore(db_url)) as store:
        return store.session(UUID(str(sid))).files_owed


def edited_workspace(db_url: str, tmp_path: Path) -> tuple[Path, str]:
    """A workspace whose win.txt one turn edited, and that turn's session id."""
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "win.txt").write_bytes(b"one\ntwo\n")
    h = edit_turn(db_url, tmp_path, workspace)
    h.store.close()
    return workspace, str(h.session_id)


def interrupted_undo(db_url: str, tmp_path: Path) -> tuple[Path, str]:
    workspace, sid = edited_workspace(db_url, tmp_path)
    killed_at_the_gate(db_url, tmp_path, "undo", sid, "--files", "--workspace", str(workspace))
    assert (workspace / "win.txt").read_bytes() == EDITED and (workspace / "new.txt").exists()  # nothing written
    debt = owed(db_url, sid)
    assert isinstance(debt, dict) and debt["kind"] == "undo" and debt["workspace"] == str(workspace.resolve())
    assert len(debt["turn_ids"]) == 1
    return workspace, sid


def test_an_undo_files_killed_before_its_writes_is_finished_by_resume_once(db_url, tmp_path):
    workspace, sid = interrupted_undo(db_url, tmp_path)
    assert session_events(db_url, sid, "FilesRestored") == []

    resumed = cli("resume", sid, db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    assert "finished the files of an interrupted undo --files" in resumed.stderr
    assert (workspace / "win.txt").read_bytes() == b"one\ntwo\n" and not (workspace / "new.txt").exists()
    assert owed(db_url, sid) is None
    [restored] = session_events(db_url, sid, "FilesRestored")
    assert {f["path"]: f["action"] for f in restored.files} == {"win.txt": "restored", "new.txt": "deleted"}  # type: ignore[attr-defined]

    again = cli("resume", "--all", db=db_url)
    assert again.returncode == 0, again.stderr
    assert len(session_events(db_url, sid, "FilesRestored")) == 1  # nothing owed any more: nothing recorded twice


def test_finishing_refuses_and_records_a_file_changed_since_the_interrupted_undo(db_url, tmp_path):
    workspace, sid = interrupted_undo(db_url, tmp_path)
    (workspace / "win.txt").write_bytes(b"the user's own edit\n")
    resumed = cli("resume", "--all", db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{REFUSED}: win.txt" in resumed.stderr
    assert (workspace / "win.txt").read_bytes() == b"the user's own edit\n"
    assert not (workspace / "new.txt").exists()  # the other file is still put back
    [restored] = session_events(db_url, sid, "FilesRestored")
    assert {f["path"]: f["action"] for f in restored.files} == {"win.txt": REFUSED, "new.txt": "deleted"}  # type: ignore[attr-defined]
    assert owed(db_url, sid) is None


def test_doctor_reports_the_owed_files_and_repair_finishes_them(db_url, tmp_path):
    workspace, sid = interrupted_undo(db_url, tmp_path)
    found = cli("doctor", "--json", db=db_url)
    assert found.returncode == 1
    [finding] = [json.loads(line) for line in found.stdout.splitlines() if '"files_owed"' in line]
    assert finding["session_id"] == sid and not finding["repaired"]
    repaired = cli("doctor", "--repair", "--json", db=db_url)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert (workspace / "win.txt").read_bytes() == b"one\ntwo\n" and not (workspace / "new.txt").exists()
    assert cli("doctor", db=db_url).returncode == 0


def test_the_next_redo_finishes_the_owed_undo_first_rather_than_stacking_on_it(db_url, tmp_path):
    workspace, sid = interrupted_undo(db_url, tmp_path)
    redone = cli("redo", sid, "--files", "--workspace", str(workspace), "--json", db=db_url)
    assert redone.returncode == 0, redone.stderr
    assert "finished the files of an interrupted undo --files" in redone.stderr
    assert {f["path"]: f["action"] for f in json.loads(redone.stdout)["files"]} == {"win.txt": "reapplied", "new.txt": "reapplied"}
    assert (workspace / "win.txt").read_bytes() == EDITED and (workspace / "new.txt").exists()
    assert len(session_events(db_url, sid, "FilesRestored")) == 1 and owed(db_url, sid) is None


def test_a_redo_files_killed_before_its_writes_is_finished_by_resume(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "win.txt").write_bytes(b"one\ntwo\n")
    h = edit_turn(db_url, tmp_path, workspace)
    undo(h.store, h.session_id, 1, files=True, workspace=workspace)
    sid = str(h.session_id)
    h.store.close()
    killed_at_the_gate(db_url, tmp_path, "redo", sid, "--files", "--workspace", str(workspace))
    assert (workspace / "win.txt").read_bytes() == b"one\ntwo\n" and owed(db_url, sid)["kind"] == "redo"  # type: ignore[index]
    resumed = cli("resume", sid, db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    assert (workspace / "win.txt").read_bytes() == EDITED and (workspace / "new.txt").read_text() == "brand new\n"
    [reapplied] = session_events(db_url, sid, "FilesReapplied")
    assert {f["path"]: f["action"] for f in reapplied.files} == {"win.txt": "reapplied", "new.txt": "reapplied"}  # type: ignore[attr-defined]
    assert owed(db_url, sid) is None


def test_a_file_written_between_the_check_and_its_write_is_refused_not_overwritten(tmp_path):
    (tmp_path / "a.txt").write_text("the turn's text\n", encoding="utf-8")
    plan = [FileRestore("a.txt", before="before the turn\n", after="the turn's text\n", turn_number=1)]
    checked = checked_restore(tmp_path, plan)
    assert plan[0].action == "restored"
    (tmp_path / "a.txt").write_text("a newer turn wrote this\n", encoding="utf-8")  # after the check, before the write
    write_restored(tmp_path, plan, checked)
    assert plan[0].action == REFUSED
    assert (tmp_path / "a.txt").read_text(encoding="utf-8") == "a newer turn wrote this\n"


def test_the_librarys_resume_finishes_the_owed_files_and_says_so_in_its_notes(db_url, tmp_path):
    import warnings

    from chronicle import Chronicle

    workspace, sid = interrupted_undo(db_url, tmp_path)
    with Chronicle(db_url) as app, warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        result = app.resume(sid)
    assert result.status == "idle" and result.exit_code == 0
    assert any("finished the files of an interrupted undo --files" in note for note in result.notes)
    assert (workspace / "win.txt").read_bytes() == b"one\ntwo\n" and not (workspace / "new.txt").exists()
    assert owed(db_url, sid) is None


def test_files_already_written_when_the_record_was_lost_are_recorded_unchanged(db_url, tmp_path):
    workspace, sid = interrupted_undo(db_url, tmp_path)
    (workspace / "win.txt").write_bytes(b"one\ntwo\n")  # as if the writes happened and FilesRestored was lost (disk full)
    (workspace / "new.txt").unlink()
    resumed = cli("resume", sid, db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    [restored] = session_events(db_url, sid, "FilesRestored")
    assert {f["path"]: f["action"] for f in restored.files} == {"win.txt": "unchanged", "new.txt": "unchanged"}  # type: ignore[attr-defined]
    assert (workspace / "win.txt").read_bytes() == b"one\ntwo\n" and owed(db_url, sid) is None


def held_at_the_gate(db_url: str, tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    """A real `chronicle ARGS` stopped at the gate, alive: it has recorded its undo/redo and not written the files."""
    gate = tmp_path / "gate"
    env = {k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}
    env.update({"CHRONICLE_DB": db_url, TEST_HALT_ENV: str(gate)})
    process = processes.start([sys.executable, "-m", "chronicle.runtime.cli", *args], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: gate.exists() or process.poll() is not None, timeout=60)
    assert process.poll() is None, process.stderr.read() if process.stderr else ""
    return process, gate


def test_an_undo_files_while_another_is_writing_its_files_is_refused_as_busy_and_takes_none_of_them(db_url, tmp_path):
    workspace, sid = edited_workspace(db_url, tmp_path)
    first, gate = held_at_the_gate(db_url, tmp_path, "undo", sid, "--files", "--workspace", str(workspace))
    try:
        for second in (cli("undo", sid, "--files", "--workspace", str(workspace), db=db_url),
                       cli("redo", sid, "--files", "--workspace", str(workspace), db=db_url)):
            assert second.returncode == 1
            assert f"session {sid} is busy" in second.stderr and "nothing was done" in second.stderr, second.stderr
            assert "finished the files of an interrupted" not in second.stderr
        assert (workspace / "win.txt").read_bytes() == EDITED, "the live undo's files are its own to write"
        assert session_events(db_url, sid, "FilesRestored") == []
    finally:
        gate.unlink(missing_ok=True)
        out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert "restored: win.txt" in out and "deleted: new.txt" in out
    assert (workspace / "win.txt").read_bytes() == b"one\ntwo\n" and not (workspace / "new.txt").exists()
    [restored] = session_events(db_url, sid, "FilesRestored")  # once, by the undo that owed it
    assert {f["path"]: f["action"] for f in restored.files} == {"win.txt": "restored", "new.txt": "deleted"}  # type: ignore[attr-defined]
    assert owed(db_url, sid) is None
    again = cli("undo", sid, "--files", "--workspace", str(workspace), db=db_url)
    assert "is busy" not in again.stderr, "the lease is released when the undo is done"
