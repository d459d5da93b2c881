"""`chronicle run` with a sync `--tools` function its timeout could not stop: the answer comes when the turn ends,
and the process still exits only once the function has ended, its late end recorded (docs/tools.md).

The function ran in the event loop's executor, which closing the loop joined; it has a thread of its own now (so the
library's blocking calls return when their turn ends), and this holds that the CLI behaves as it did: the process
waits for that thread at exit, and the late end is recorded before it does."""

from __future__ import annotations

import json
import sys
import time

from tests.helpers import _base_env, cli, json_lines, response, text, tool_use, write_script
from tests.processes import start

TOOLS = '''
import pathlib, time
from chronicle import tool

@tool(timeout_s=0.3)
def send_mail(workspace: str) -> str:
    """Send a mail: a sync function, which its timeout cannot stop.

    Args:
        workspace: Where the test's files are.
    """
    here = pathlib.Path(workspace)
    deadline = time.monotonic() + 30
    while not (here / "release").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    (here / "ended").touch()
    return "sent"
'''


def test_run_answers_when_the_turn_ends_and_exits_once_the_function_left_running_has_recorded_its_late_end(
        sqlite_url, workspace, tmp_path):
    (tmp_path / "mail_tools.py").write_text(TOOLS, encoding="utf-8")
    script = write_script(tmp_path / "s.json", [response(tool_use("m", "send_mail", workspace=str(workspace))),
                                                response(text("The mail timed out."))])
    env = {**_base_env(), "CHRONICLE_DB": sqlite_url, "PYTHONPATH": str(tmp_path)}
    process = start([sys.executable, "-m", "chronicle.runtime.cli", "run", "mail", "--provider", f"scripted:{script}",
                     "--workspace", str(workspace), "--tools", "mail_tools:send_mail", "--yes", "--json"],
                    cwd=tmp_path, env=env, stdout=-1, stderr=-1, text=True)
    assert process.stdout is not None
    lines = []
    while not lines or lines[-1].get("type") != "agent_end":
        line = process.stdout.readline()
        assert line, ("exited before its answer", lines, process.communicate())
        lines.append(json.loads(line))
    answered_while_running = not (workspace / "ended").exists()
    time.sleep(0.3)
    still_alive = process.poll() is None
    (workspace / "release").touch()
    out, err = process.communicate(timeout=60)
    assert answered_while_running, "the answer came only once the function had ended"
    assert still_alive, "the process exited while its tool's function still ran"
    assert process.returncode == 0, err
    assert [e["output"] for e in lines if e["type"] == "tool_end"][0].startswith("send_mail timed out after 0.3 s")
    assert (workspace / "ended").exists()
    audit = json_lines(cli("audit", "--json", db=sqlite_url).stdout)
    assert [(r["kind"], r["status"]) for r in audit if r["name"] == "send_mail"] == [
        ("tool_call", "failed"), ("tool_finished_late", "completed")]
