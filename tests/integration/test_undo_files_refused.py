"""undo/redo --files with a file left as it is ("refused: changed since") exits 1, naming the file and what to do.

The file is changed where a person's editor (or a turn of another process) could change it: after the command
checked it and recorded the undo, before its write. The process waits there at the test-only gate
undo_redo.TEST_HALT_ENV; the test writes the file, then removes the gate to let it go on. The log still says exactly
what was put back and what was refused (FilesRestored / FilesReapplied); only the exit code and the error line are new.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from chronicle.runtime.undo_redo import REFUSED, TEST_HALT_ENV, undo
from tests import processes
from tests.helpers import _base_env
from tests.integration.test_undo_file_restore import edit_turn
from tests.integration.test_undo_files_crash import session_events
from tests.recovery import wait_for

EDITED = b"uno\ndos\n"


def held_at_the_gate(db_url: str, tmp_path: Path, *args: str) -> tuple[subprocess.Popen[str], Path]:
    """`chronicle ARGS`, waiting at the gate before its file writes (its undo/redo already recorded)."""
    gate = tmp_path / "gate"
    env = {**_base_env(), "CHRONICLE_DB": db_url, TEST_HALT_ENV: str(gate)}
    process = processes.start([sys.executable, "-m", "chronicle.runtime.cli", *args], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: gate.exists() or process.poll() is not None, timeout=60)
    except BaseException:
        processes.stop(process)
        raise
    assert process.poll() is None, process.communicate()
    return process, gate


def edited_session(db_url: str, tmp_path: Path) -> tuple[Path, str, object]:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "win.txt").write_bytes(b"one\ntwo\n")
    h = edit_turn(db_url, tmp_path, workspace)
    return workspace, str(h.session_id), h


def test_undo_files_exits_1_naming_a_file_changed_between_its_check_and_its_write(db_url, tmp_path):
    workspace, sid, h = edited_session(db_url, tmp_path)
    h.store.close()
    process, gate = held_at_the_gate(db_url, tmp_path, "undo", sid, "--files", "--workspace", str(workspace), "--json")
    (workspace / "win.txt").write_bytes(b"the user's own edit\n")
    os.unlink(gate)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, out + err
    [error] = [line for line in err.splitlines() if line.startswith("error:")]
    assert "win.txt" in error and "new.txt" not in error and "by hand" in error, err
    assert not any(line.startswith("warning:") for line in err.splitlines())  # said once, as the error
    row = json.loads(out)  # --json still prints what was done
    assert {f["path"]: f["action"] for f in row["files"]} == {"win.txt": REFUSED, "new.txt": "deleted"}
    [restored] = session_events(db_url, sid, "FilesRestored")
    assert {f["path"]: f["action"] for f in restored.files} == {"win.txt": REFUSED, "new.txt": "deleted"}  # type: ignore[attr-defined]
    assert (workspace / "win.txt").read_bytes() == b"the user's own edit\n" and not (workspace / "new.txt").exists()


def test_redo_files_exits_1_naming_a_file_changed_between_its_check_and_its_write(db_url, tmp_path):
    workspace, sid, h = edited_session(db_url, tmp_path)
    undo(h.store, h.session_id, 1, files=True, workspace=workspace)
    h.store.close()
    process, gate = held_at_the_gate(db_url, tmp_path, "redo", sid, "--files", "--workspace", str(workspace))
    (workspace / "new.txt").write_text("written meanwhile\n", encoding="utf-8")
    os.unlink(gate)
    out, err = process.communicate(timeout=60)
    assert process.returncode == 1, out + err
    [error] = [line for line in err.splitlines() if line.startswith("error:")]
    assert "new.txt" in error and "win.txt" not in error, err
    assert f"{REFUSED}: new.txt" in out and "reapplied: win.txt" in out  # the rows are still shown
    [reapplied] = session_events(db_url, sid, "FilesReapplied")
    assert {f["path"]: f["action"] for f in reapplied.files} == {"win.txt": "reapplied", "new.txt": REFUSED}  # type: ignore[attr-defined]
    assert (workspace / "win.txt").read_bytes() == EDITED and (workspace / "new.txt").read_text() == "written meanwhile\n"


def test_the_librarys_undo_returns_the_rows_and_warns_with_the_clis_line(db_url, tmp_path, monkeypatch):
    """The CLI exits 1; the library, whose undo was done and recorded all the same, returns the row (its `files`
    say `refused`) and warns (ChronicleWarning) with the same line, rather than leaving the refusal to be found."""
    import threading
    import warnings

    from chronicle import Chronicle, ChronicleWarning

    workspace, sid, h = edited_session(db_url, tmp_path)
    h.store.close()
    gate = tmp_path / "gate"
    monkeypatch.setenv(TEST_HALT_ENV, str(gate))
    done: dict[str, object] = {}

    def undo_in_the_library() -> None:
        with Chronicle(db_url) as app, warnings.catch_warnings(record=True) as warned:
            warnings.simplefilter("always")
            done["row"] = app.undo(sid, files=True, workspace=workspace)
            done["warned"] = [str(w.message) for w in warned if issubclass(w.category, ChronicleWarning)]

    worker = threading.Thread(target=undo_in_the_library)
    worker.start()
    wait_for(lambda: gate.exists() or not worker.is_alive(), timeout=60)
    (workspace / "win.txt").write_bytes(b"the user's own edit\n")
    os.unlink(gate)
    worker.join(timeout=60)
    row = done["row"]
    assert isinstance(row, dict) and {f["path"]: f["action"] for f in row["files"]} == {"win.txt": REFUSED, "new.txt": "deleted"}
    [line] = done["warned"]  # type: ignore[misc]
    assert line.startswith("undo --files left win.txt as they are") and "by hand" in line
