"""A read-only store (immutable file and directory, as on a read-only mount) can be listed and
read; a command that would record says "read-only" plainly instead of an internal error."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers import cli, json_lines, response, text, write_script


def immutable(paths: list[Path], on: bool) -> bool:
    if shutil.which("chattr") is None:
        return False
    done = subprocess.run(["chattr", "+i" if on else "-i", *map(str, paths)], capture_output=True)
    return done.returncode == 0


@pytest.mark.parametrize("built", [False, True], ids=["read-models-never-built", "read-models-built"])
def test_a_read_only_store_lists_and_reads_and_a_write_says_read_only(tmp_path, workspace, built):
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    db = f"sqlite:///{store_dir / 'c.db'}"
    script = write_script(tmp_path / "s.json", [[response(text("first answer"))], [response(text("second"))]])
    ran = cli("run", "hello", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db)
    assert ran.returncode == 0, ran.stderr
    sid = json_lines(ran.stdout)[0]["session_id"]
    if built:
        assert cli("cost", "--json", db=db).returncode == 0  # catches the read models up while it still can
    files = [store_dir, *store_dir.iterdir()]
    if not immutable(files, True):
        pytest.skip("chattr +i is not available here (it needs root on a filesystem that supports it)")
    try:
        listed = cli("sessions", "--json", db=db)
        assert listed.returncode == 0, listed.stderr
        assert [r["session_id"] for r in json_lines(listed.stdout)] == [sid]
        assert cli("log", sid, "--json", db=db).returncode == 0
        history = cli("history", sid, db=db)
        assert history.returncode == 0 and "first answer" in history.stdout
        audit = cli("audit", "--session", sid, "--json", db=db)
        if built:
            assert audit.returncode == 0 and json_lines(audit.stdout)
        else:
            assert audit.returncode == 1 and "read-only" in audit.stderr and "internal error" not in audit.stderr

        more = cli("run", "again", "--session", sid, "--workspace", str(workspace), db=db)
        assert more.returncode == 1
        assert "read-only" in more.stderr and "internal error" not in more.stderr
        assert len(more.stderr.strip().splitlines()) == 1
        archived = cli("archive", sid, db=db)
        assert archived.returncode == 1 and "read-only" in archived.stderr and "internal error" not in archived.stderr
        assert sorted(p.name for p in store_dir.iterdir()) == sorted(p.name for p in files[1:])  # nothing created
    finally:
        immutable(files, False)
