"""`log --follow` tails the log live (Ctrl-C exits 0); `log` and `history` page long output on a
terminal, never through a pipe, and `--no-pager` prints straight."""

from __future__ import annotations

import json
import os
import queue
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests import processes
from tests.e2e.terminal import Terminal
from tests.helpers import cli, json_lines, response, text, write_script


def start(db: str, script, workspace) -> str:  # type: ignore[no-untyped-def]
    done = cli("run", "first", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db)
    assert done.returncode == 0, done.stderr
    return json_lines(done.stdout)[0]["session_id"]


class Lines:
    """The follower's stdout, line by line, read on a thread (a pipe's buffer hides lines from select)."""

    def __init__(self, proc: subprocess.Popen) -> None:  # type: ignore[type-arg]
        self.queue: queue.Queue[str] = queue.Queue()
        threading.Thread(target=lambda: [self.queue.put(line) for line in proc.stdout], daemon=True).start()  # type: ignore[union-attr]

    def until(self, want, timeout: float = 60) -> list[dict]:  # type: ignore[no-untyped-def]
        seen: list[dict] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                seen.append(json.loads(self.queue.get(timeout=0.5)))
            except queue.Empty:
                continue
            if want(seen):
                return seen
        raise AssertionError(f"never saw it; saw {[(e['aggregate'], e['event']) for e in seen]}")


def test_log_follow_prints_the_log_then_each_new_event_and_ctrl_c_exits_0(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [[response(text("one"))], [response(text("two"))]])
    sid = start(db_url, script, workspace)
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY",)} | {"CHRONICLE_DB": db_url}
    proc = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "log", sid, "--follow", "--json"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    lines = Lines(proc)
    try:
        first = lines.until( lambda seen: any(e["event"] == "TurnEnded" for e in seen))
        assert cli("run", "second", "--session", sid, "--workspace", str(workspace), db=db_url).returncode == 0
        more = lines.until(lambda seen: sum(e["event"] == "TurnEnded" for e in seen) >= 1)
        inputs = [e["data"].get("text") for e in first + more if e["event"] == "InputQueued"]
        assert inputs == ["first", "second"]
        positions = [e["position"] for e in first + more]
        assert positions == sorted(set(positions))  # each event once, in commit order
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
        assert "Traceback" not in proc.stderr.read()
    finally:
        processes.stop(proc)


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_log_and_history_page_on_a_terminal_and_not_with_no_pager_or_through_a_pipe(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("paged answer"))])
    sid = start(sqlite_url, script, workspace)
    paged = tmp_path / "paged.txt"
    for args, expect_paged in ((["log", sid], True), (["history", sid], True), (["log", sid, "--no-pager"], False)):
        paged.unlink(missing_ok=True)
        command = " ".join(shlex.quote(p) for p in [
            "env", f"CHRONICLE_DB={sqlite_url}", f"PAGER=cat > {paged}", sys.executable, "-m", "chronicle.runtime.cli", *args,
        ])
        term = Terminal(command)
        try:
            term.wait_for("EXITED=0")
        finally:
            term.close()
        assert paged.exists() == expect_paged, args
        if expect_paged:
            assert ("paged answer" if args[0] == "history" else "TurnEnded") in paged.read_text()
    through_pipe = cli("history", sid, db=sqlite_url, env={"PAGER": f"cat > {paged}"})
    paged.unlink(missing_ok=True)
    assert "paged answer" in through_pipe.stdout and not paged.exists()
