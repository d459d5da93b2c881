"""`chronicle chat` reads with a line editor in a terminal (history, multi-line input, Markdown
answers) and plain lines from a pipe, so scripts can drive it."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest

from tests.e2e.controls_helpers import log_of
from tests.e2e.terminal import Terminal
from tests.helpers import cli, json_lines, response, text, tool_use


def script(tmp_path: Path, answers: list[str]) -> Path:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": [[response(text(a))] for a in answers]}}), encoding="utf-8")
    return path


def inputs(sqlite_url: str) -> list[str]:
    sid = json.loads(cli("sessions", "--json", db=sqlite_url).stdout.splitlines()[0])["session_id"]
    return [e["data"]["text"] for e in log_of(sid, sqlite_url) if e["event"] == "InputQueued"]


def test_chat_through_a_pipe_reads_plain_lines_joins_backslash_continuations_and_prints_plain_text(sqlite_url, workspace, tmp_path):
    s = script(tmp_path, ["**bold** answer", "second"])
    done = cli("chat", "--provider", f"scripted:{s}", "--workspace", str(workspace), db=sqlite_url,
               input="first line \\\nsecond line\nagain\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "**bold** answer" in done.stdout and "second" in done.stdout  # no Markdown rendering, no spinner
    assert "\x1b" not in done.stdout
    assert inputs(sqlite_url) == ["first line \nsecond line", "again"]
    assert not (Path(sqlite_url[len("sqlite:///"):]).parent / "chat_history").exists()  # no editor, no history


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_chat_in_a_terminal_keeps_history_takes_multi_line_input_and_renders_markdown(sqlite_url, workspace, tmp_path):
    s = script(tmp_path, ["# Heading\n\nsome **strong** words", "two", "three"])
    term = Terminal.chat(sqlite_url, s, workspace)
    try:
        term.wait_for("you>")  # a line editor draws the prompt; tmux drops its trailing blank
        term.type("hi there")
        screen = term.wait_for("some strong words")
        assert "**" not in screen and "# Heading" not in screen  # rendered, not shown as source

        term.wait_for_after("some strong words", "you>")
        term.tmux("send-keys", "-t", "chat", "-l", "line one")
        term.tmux("send-keys", "-t", "chat", "Escape", "Enter")  # Esc, Enter: a line break, not a send
        term.type("line two")
        term.wait_for("two", count=2)  # "line two" as typed, then the answer

        term.wait_for_after("two", "you>")  # the answer's line, not "line two": the prompt back after it
        for _ in range(3):  # back through the history (within a multi-line entry, Up moves up a line first)
            term.key("Up")
        term.wait_for("you> hi there", count=2)
        term.key("Enter")
        term.wait_for_after("three", "you>")
        term.type("/quit")
        screen = term.wait_for("EXITED=0")
    finally:
        term.close()
    assert "Traceback" not in screen
    assert inputs(sqlite_url) == ["hi there", "line one\nline two", "hi there"]
    history = Path(sqlite_url[len("sqlite:///"):]).parent / "chat_history"
    assert "line one" in history.read_text(encoding="utf-8")
    assert stat.S_IMODE(history.stat().st_mode) == 0o600


def test_undo_and_redo_with_files_in_chat_put_the_files_back_and_forth(sqlite_url, workspace, tmp_path):
    path = tmp_path / "w.json"
    path.write_text(json.dumps({"agents": {"main": [[response(tool_use("w1", "write_file", path="n.txt", content="v1")),
                                                     response(text("wrote it"))]]}}), encoding="utf-8")
    done = cli("chat", "--provider", f"scripted:{path}", "--workspace", str(workspace), "--yes", db=sqlite_url,
               input="write\n/undo --files\n/redo --files\n/redo extra\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "deleted: n.txt" in done.stdout and "reapplied: n.txt" in done.stdout
    assert "/redo takes only --files" in done.stdout
    assert (workspace / "n.txt").read_text(encoding="utf-8") == "v1"
    sid = json.loads(cli("sessions", "--json", db=sqlite_url).stdout.splitlines()[0])["session_id"]
    events = [e["event"] for e in log_of(sid, sqlite_url)]
    assert events.index("FilesRestored") < events.index("FilesReapplied")


def test_fork_in_chat_takes_the_turn_to_fork_at_and_refuses_one_that_is_not_there(sqlite_url, workspace, tmp_path):
    """`/fork 1` forks at turn 1 as `fork --at 1` does; an argument used to be ignored (a fork of the whole branch)."""
    s = script(tmp_path, ["one", "two"])
    done = cli("chat", "--provider", f"scripted:{s}", "--workspace", str(workspace), db=sqlite_url,
               input="first\nsecond\n/fork 9\n/fork x\n/fork 1\n/quit\n")
    assert done.returncode == 0, done.stderr
    assert "TURN must be 1..2" in done.stdout and "expected a whole number (0 or more), got 'x'" in done.stdout
    assert "(1 turn(s) shared)" in done.stdout
    forks = [row for row in json_lines(cli("sessions", "--json", db=sqlite_url).stdout) if row["forked_from"]]
    assert [(row["forked_from"]["turn"], row["turns"]) for row in forks] == [(1, 1)]
