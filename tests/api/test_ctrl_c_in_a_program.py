"""Ctrl-C in a program that calls `run_sync`: the turn records its cancel, then the program stops with
KeyboardInterrupt as any Python call would. (It used to get a `cancelled` result back and go on, so a loop over
prompts needed one Ctrl-C per prompt.)"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from chronicle import Chronicle
from tests.helpers import _base_env, response, text, tool_use
from tests.processes import start

PROGRAM = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a background process starts with SIGINT ignored
from chronicle import Agent, Chronicle
agent = Agent(tools=["bash"], provider="scripted:" + sys.argv[2])
with Chronicle(sys.argv[1]) as app:
    try:
        for prompt in ("first", "second", "third"):
            result = app.run_sync(agent, prompt, workspace=sys.argv[3], auto_approve=True)
            print("went on after", prompt, result.status, flush=True)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
        raise
"""


def interrupted(program: str, db_url: str, workspace: Path, tmp_path: Path) -> tuple[subprocess.Popen[str], str, str]:
    """Run `program` on a session whose bash call waits a minute; SIGINT once the call has begun; its output."""
    process = sent_sigint(program, [response(tool_use("b", "bash", command="touch started; sleep 60")), response(text("never"))],
                          db_url, workspace, tmp_path)
    out, err = process.communicate(timeout=60)
    return process, out, err


def sent_sigint(program: str, responses: list[Any], db_url: str, workspace: Path, tmp_path: Path) -> subprocess.Popen[str]:
    """`program` run on a scripted session answering `responses`, sent SIGINT once its tool call has begun (it touches
    `started` in the workspace)."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": responses}}), encoding="utf-8")
    path = tmp_path / "program.py"
    path.write_text(program, encoding="utf-8")
    process = start([sys.executable, str(path), db_url, str(script), str(workspace)], env=_base_env(),
                    stdout=-1, stderr=-1, text=True)
    deadline = time.monotonic() + 60
    while not (workspace / "started").exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    return process


def test_ctrl_c_during_run_sync_records_the_cancel_and_stops_the_program(db_url, workspace, tmp_path):
    process, out, err = interrupted(PROGRAM, db_url, workspace, tmp_path)
    assert out.splitlines() == ["KeyboardInterrupt"], (out, err)
    assert process.returncode != 0 and "KeyboardInterrupt" in err
    with Chronicle(db_url) as app:
        [row] = app.sessions()  # the loop went no further than the first prompt
        assert row["status"] == "idle"
        ends = [(e["aggregate"], e["event"], e["data"].get("reason")) for e in app.log(row["session_id"])
                if e["event"] == "Cancelled"]
        assert ends == [("tool_call", "Cancelled", "cancelled by the user"), ("turn", "Cancelled", "cancelled by the user")]


WORKER = """
import signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)
from chronicle import Agent, Chronicle
agent = Agent(tools=["bash"], provider="scripted:" + sys.argv[2])
with Chronicle(sys.argv[1]) as app:
    app.submit(agent, "first", workspace=sys.argv[3])
    try:
        app.work(idle_exit=60, auto_approve=True)
        print("returned", flush=True)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
        raise
"""


def test_ctrl_c_during_work_records_the_cancel_of_the_turn_in_hand_and_stops_the_program(sqlite_url, workspace, tmp_path):
    _, out, err = interrupted(WORKER, sqlite_url, workspace, tmp_path)
    assert out.splitlines() == ["KeyboardInterrupt"], (out, err)
    with Chronicle(sqlite_url) as app:
        [row] = app.sessions()
        assert row["status"] == "idle"
        assert [e["aggregate"] for e in app.log(row["session_id"]) if e["event"] == "Cancelled"] == ["tool_call", "turn"]


SYNC_TOOL_PROGRAM = """
import pathlib, signal, sys, time
signal.signal(signal.SIGINT, signal.default_int_handler)
from chronicle import Agent, Chronicle, tool
workspace = pathlib.Path(sys.argv[3])
ended = []

@tool()
def send_mail() -> str:
    \"\"\"Send a mail: a sync function, which Ctrl-C cannot stop.\"\"\"
    (workspace / "started").touch()
    deadline = time.monotonic() + 30
    while not (workspace / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    ended.append(True)
    return "sent"

agent = Agent(tools=[send_mail], provider="scripted:" + sys.argv[2])
with Chronicle(sys.argv[1]) as app:
    try:
        app.run_sync(agent, "mail", workspace=sys.argv[3])
        print("returned", flush=True)
    except KeyboardInterrupt:
        print("KeyboardInterrupt", "after the function ended" if ended else "while the function runs", flush=True)
        raise
"""


def test_ctrl_c_during_a_sync_tool_raises_at_once_and_closing_records_its_late_end(db_url, workspace, tmp_path):
    """KeyboardInterrupt reaches the program as soon as the cancel is recorded, while the function Ctrl-C could not
    stop still runs (it came only once the function ended: the blocking call's event loop joined its thread); the
    `with` block's close then waits for the function and records its late end."""
    process = sent_sigint(SYNC_TOOL_PROGRAM, [response(tool_use("m", "send_mail")), response(text("never"))], db_url,
                          workspace, tmp_path)
    assert process.stdout is not None
    said = process.stdout.readline().strip()  # the function runs until the release file exists (or 30 s)
    (workspace / "release").touch()
    out, err = process.communicate(timeout=60)
    assert said == "KeyboardInterrupt while the function runs", (said, out, err)
    assert process.returncode != 0 and "KeyboardInterrupt" in err
    with Chronicle(db_url) as app:
        [row] = app.sessions()
        ends = [(e["aggregate"], e["event"]) for e in app.log(row["session_id"])
                if e["event"] in ("Cancelled", "FinishedAfterAbandon")]
        assert ends == [("tool_call", "Cancelled"), ("turn", "Cancelled"), ("tool_call", "FinishedAfterAbandon")]
