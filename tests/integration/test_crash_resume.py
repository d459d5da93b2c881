"""The crash harness: SIGKILL a running turn at many points, resume it, and check nothing broke.

The scripted session reads a file, appends to a side-effect file with bash (twice), writes a
file, and answers; model calls take a little time. The test watches the store's position and
kills the process right after a chosen event is committed (optionally a moment later, to land
inside a tool or a model call), then runs `chronicle resume` as a person would.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from contextlib import closing

import pytest

from chronicle.runtime.store import ChronicleStore
from tests import processes
from tests.helpers import cli, response, text, tool_use
from tests.recovery import assert_recovered, wait_for

SCRIPT = [
    response(tool_use("r1", "read_file", path="hello.txt"), tool_use("b1", "bash", command="sleep 0.3; echo A >> side.txt"), delay_s=0.15),
    response(tool_use("w1", "write_file", path="out.txt", content="written"), delay_s=0.15),
    response(tool_use("b2", "bash", command="echo B >> side.txt"), delay_s=0.15),
    response(text("all done"), delay_s=0.1),
]

# (events committed before the kill, extra seconds) -> where the process dies. Positions of an
# undisturbed run: 2 input queued | 4-6 turn started, model call 0 | 12 bash A started |
# 16 step 0 results, model call 1 | 19 write_file started | 21 model call 2 | 26 bash B started
# | 29 final response.
KILL_POINTS = {
    "before-the-turn-starts": (2, 0.0),
    "during-the-first-model-call": (6, 0.05),
    "inside-bash-A": (12, 0.1),
    "right-after-step-results": (16, 0.0),
    "inside-write-file": (19, 0.0),
    "during-a-later-model-call": (21, 0.08),
    "inside-bash-B": (26, 0.0),
    "after-the-final-response": (29, 0.0),
}


def chronicle_env(db: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY",)}
    env["CHRONICLE_DB"] = db
    return env


@pytest.mark.parametrize("kill_point", list(KILL_POINTS))
def test_a_turn_killed_anywhere_resumes_to_completion_without_losing_or_repeating_anything(db_url, workspace, tmp_path, kill_point):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": SCRIPT}}))
    store = ChronicleStore(db_url)
    events, extra = KILL_POINTS[kill_point]
    process = processes.start(
        [sys.executable, "-m", "chronicle.runtime.cli", "run", "go", "--provider", f"scripted:{script}",
         "--workspace", str(workspace), "--yes", "--json"],
        env=chronicle_env(db_url), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    try:
        wait_for(lambda: store.max_position() >= events or process.poll() is not None, timeout=30, interval=0.002)
        time.sleep(extra)  # how far into the step the kill lands (KILL_POINTS): the moment is what is tested
        process.send_signal(signal.SIGSTOP)  # stopped, it starts nothing more: the children it leaves are these
        orphans = processes.descendants(process.pid)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(timeout=10)
    assert process.returncode == -signal.SIGKILL, "the run finished before the kill point; the script is too fast"
    sid = wait_for(lambda: store.session_ids())[0]
    store.close()

    resumed = cli("resume", str(sid), "--yes", db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    processes.wait_gone(orphans)  # a bash child orphaned by the kill may still be finishing its append

    with closing(ChronicleStore(db_url)) as store:
        entries = assert_recovered(store, sid)
    side = (workspace / "side.txt").read_text().splitlines() if (workspace / "side.txt").exists() else []
    assert sorted(side) == sorted(set(side)), f"a non-idempotent tool ran twice: {side}"
    interrupted = {e["aggregate_id"] for e in entries if e["aggregate"] == "tool_call" and e["event"] == "Interrupted"}
    write = next(e["aggregate_id"] for e in entries if e["event"] == "Requested" and e["data"]["name"] == "write_file")
    out = workspace / "out.txt"
    assert (out.exists() and out.read_text() == "written") or write in interrupted
    completed_bash = [e for e in entries if e["aggregate"] == "tool_call" and e["event"] == "Completed" and e["data"]["name"] == "bash"]
    assert len(side) >= len(completed_bash), "a bash call recorded as completed left no trace"

def test_resume_with_nothing_in_flight_says_so_and_exits_0(db_url, workspace, tmp_path):
    nothing = cli("resume", "--all", db=db_url)
    assert nothing.returncode == 0 and "nothing to resume" in nothing.stdout
