"""A reader of the CLI's output that goes away (`chronicle run … | head -1`): a turn runs to its end and is recorded;
a command that only reads exits quietly with 141, as a program SIGPIPE ended does in a shell (runtime/cli/pipes.py)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import processes
from tests.helpers import cli, json_lines, response, text, tool_use, write_script


def _into_a_closed_pipe(args: list[str], db: str, cwd: Path, input: bytes | None = None) -> tuple[int, str]:
    """`chronicle ARGS | head -0`: stdout a pipe whose reader has gone before the first write. (exit code, stderr)"""
    read, write = os.pipe()
    os.close(read)
    try:
        process = processes.start([sys.executable, "-m", "chronicle.runtime.cli", *args],
                                  stdin=subprocess.DEVNULL if input is None else subprocess.PIPE,
                                  stdout=write, stderr=subprocess.PIPE, cwd=cwd,
                                  env={**os.environ, "CHRONICLE_DB": db, "COLUMNS": "200"})
    finally:
        os.close(write)
    _, err = process.communicate(input, timeout=60)
    return process.returncode, err.decode()


@pytest.mark.parametrize("as_json", [False, True])
def test_a_turn_whose_reader_went_away_runs_to_its_end_and_is_recorded(sqlite_url, workspace, tmp_path, as_json):
    """It stopped between approving a bash call and starting it, exit 1 and nothing said, the session `running` with no
    process: rich raised SystemExit from inside the renderer when stdout broke."""
    script = write_script(tmp_path / "s.json", [
        response(text("line1"), tool_use("b1", "bash", command="sleep 0.3; echo done > ran.txt")),
        response(text("final")),
    ])
    code, err = _into_a_closed_pipe(["run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes",
                                     *(["--json"] if as_json else [])], sqlite_url, tmp_path)
    assert code == 0, err
    assert "Traceback" not in err and "error" not in err, err
    assert (workspace / "ran.txt").read_text() == "done\n"
    [row] = json_lines(cli("sessions", "--json", db=sqlite_url).stdout)
    assert row["status"] == "idle" and row["turns"] == 1, row
    assert json_lines(cli("history", row["session_id"], "--json", db=sqlite_url).stdout)[-1]["content"][0]["text"] == "final"


def test_chat_from_a_script_goes_on_when_its_reader_went_away(sqlite_url, workspace, tmp_path):
    """`chat < lines | head -1`: the prompt `input()` writes broke first, and chat died before its first message."""
    script = write_script(tmp_path / "s.json", [
        [response(text("line1"), tool_use("b1", "bash", command="echo done > ran.txt")), response(text("first"))],
        [response(text("second"))],
    ])
    code, err = _into_a_closed_pipe(["chat", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes"],
                                    sqlite_url, tmp_path, input=b"go\nagain\n")
    assert code == 0, err
    assert (workspace / "ran.txt").read_text() == "done\n"
    [row] = json_lines(cli("sessions", "--json", db=sqlite_url).stdout)
    assert row["status"] == "idle" and row["turns"] == 2, row


def test_a_command_that_reads_exits_141_quietly_when_its_reader_went_away(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("hello"))])
    ran = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert ran.returncode == 0, ran.stderr
    for args in (["log", "--json", ran.stderr.split()[-1]], ["sessions", "--json"], ["sessions"], ["--help"], ["run", "--help"],
                 ["--version"]):
        code, err = _into_a_closed_pipe(args, sqlite_url, tmp_path)
        assert (code, err) == (141, ""), args


def _with_stdin_closed(args: list[str], db: str, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """`chronicle ARGS <&-`: Python gives sys.stdin None, and each of these crashed on `sys.stdin.isatty()`."""
    process = processes.start([sys.executable, "-m", "chronicle.runtime.cli", *args], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, cwd=cwd, env={**os.environ, "CHRONICLE_DB": db, "COLUMNS": "200"},
                              preexec_fn=lambda: os.close(0))
    out, err = process.communicate(timeout=60)
    return subprocess.CompletedProcess(process.args, process.returncode, out, err)


def test_a_closed_stdin_reads_as_empty_and_chat_starts_no_session_without_a_first_input(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("hello"))])
    provider = ["--provider", f"scripted:{script}", "--workspace", str(workspace)]
    store = Path(sqlite_url.removeprefix("sqlite:///"))
    for _ in range(2):  # each `chat < /dev/null` left an empty 0-turn session (the first, a new store too)
        chat = _with_stdin_closed(["chat", *provider], sqlite_url, tmp_path)
        assert chat.returncode == 0, chat.stderr
        assert b"no input came (stdin is empty or closed), so no session was started" in chat.stderr
        assert not store.exists()
    prompt = _with_stdin_closed(["run", "-", *provider], sqlite_url, tmp_path)
    assert prompt.returncode == 2 and prompt.stderr == b"error: the prompt is empty; say what the agent should do\n", prompt.stderr
    assert not store.exists()
    ran = cli("run", "go", *provider, db=sqlite_url)
    assert ran.returncode == 0, ran.stderr
    forget = _with_stdin_closed(["forget", ran.stderr.split()[-1]], sqlite_url, tmp_path)
    assert forget.returncode == 2 and b"add --yes to confirm" in forget.stderr, forget.stderr
    assert b"internal error" not in forget.stderr + prompt.stderr + chat.stderr
    piped = cli("chat", *provider, db=sqlite_url, input="")  # an empty pipe: no session either
    assert piped.returncode == 0 and len(json_lines(cli("sessions", "--json", db=sqlite_url).stdout)) == 1, piped.stderr
