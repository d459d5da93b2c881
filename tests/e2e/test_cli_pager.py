"""On a terminal, `sessions`, `log` and `history` go through $PAGER, as git does; `--no-pager` and a pipe print
straight. Run under a pseudo-terminal, with a PAGER that marks each line it is handed."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from tests import processes
from tests.helpers import cli, json_lines, response, text, write_script


def _on_a_terminal(args: list[str], db: str, tmp_path) -> str:
    """`chronicle ARGS` with stdout a terminal; what reached the terminal."""
    main, side = pty.openpty()
    env = {**os.environ, "CHRONICLE_DB": db, "PAGER": "sed s/^/paged:/", "COLUMNS": "120", "TERM": "xterm"}
    proc = processes.start([sys.executable, "-m", "chronicle.runtime.cli", *args], stdin=side, stdout=side,
                           stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    os.close(side)
    seen = processes.read_terminal(main)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    return seen.decode(errors="replace")


@pytest.mark.parametrize("command", ["sessions", "log", "history"])
def test_a_terminal_gets_the_table_through_the_pager_and_no_pager_prints_it_straight(sqlite_url, workspace, tmp_path, command):
    script = write_script(tmp_path / "s.json", [response(text("done"))])
    ran = cli("run", "hello", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    sid = json_lines(ran.stdout)[0]["session_id"]
    args = [command] if command == "sessions" else [command, sid]
    assert "paged:" in _on_a_terminal(args, sqlite_url, tmp_path)
    straight = _on_a_terminal([*args, "--no-pager"], sqlite_url, tmp_path)
    assert "paged:" not in straight and ("done" if command == "history" else sid[:8]) in straight
