"""MCP as an operator meets it: `chronicle mcp list`, a run that calls a stdio server's tool, and no
server process left behind when the run gets SIGTERM mid-call."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests import processes
from tests.helpers import cli, json_lines, response, text, tool_use, write_script

SERVER = Path(__file__).resolve().parents[1] / "mcp_server.py"


def config(workspace: Path, pidfile: Path | None = None, extra: str = "") -> None:
    env = f'env = {{ MCP_TEST_PIDFILE = "{pidfile}" }}\n' if pidfile else ""
    (workspace / "chronicle.toml").write_text(
        f'[mcp.t]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(SERVER))}, "stdio"]\n'
        f"trust_annotations = true\n{env}[mcp.t.tools.slow]\nrequires_approval = false\n{extra}",
        encoding="utf-8",
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_mcp_list_shows_each_tool_with_its_flags_and_a_broken_server_exits_1(workspace):
    config(workspace, extra='[mcp.down]\ncommand = "/nonexistent/server"\n')
    listed = cli("mcp", "list", "--json", "--workspace", str(workspace))
    assert listed.returncode == 1
    rows = json_lines(listed.stdout)
    tools = {r["name"]: r for r in rows if "name" in r}
    assert tools["t__lookup"]["read_only"] is True and tools["t__lookup"]["requires_approval"] is False
    assert tools["t__echo"]["requires_approval"] is True and tools["t__slow"]["requires_approval"] is False
    assert tools["t__echo"]["input_schema"]["properties"]["text"]["type"] == "string" and tools["t__echo"]["agents"] == ["main"]
    down = [r for r in rows if r["server"] == "down"]
    assert len(down) == 1 and "unavailable" in down[0]["error"]
    only = cli("mcp", "list", "--server", "t", "--workspace", str(workspace))
    assert only.returncode == 0 and "t__picture" in only.stdout
    unknown = cli("mcp", "list", "--server", "nope", "--workspace", str(workspace))
    assert unknown.returncode == 2 and "no MCP server named 'nope'" in unknown.stderr


def test_sigterm_during_an_mcp_call_cancels_the_turn_and_leaves_no_server_running(db_url, workspace, tmp_path):
    pidfile = tmp_path / "server.pid"
    config(workspace, pidfile)
    script = write_script(tmp_path / "s.json", [response(tool_use("u1", "t__slow", seconds=120)), response(text("never"))])
    env = {**os.environ, "CHRONICLE_DB": db_url, "COLUMNS": "200"}
    env.pop("ANTHROPIC_API_KEY", None)
    process = processes.start(
        [
            sys.executable,
            "-m",
            "chronicle.runtime.cli",
            "run",
            "wait",
            "--provider",
            f"scripted:{script}",
            "--workspace",
            str(workspace),
            "--json",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stdout is not None
    lines = []
    for line in process.stdout:
        lines.append(json.loads(line))
        if lines[-1]["type"] == "tool_start":
            break
    assert lines[-1]["name"] == "t__slow"
    server_pid = int(pidfile.read_text())
    assert alive(server_pid)
    process.send_signal(signal.SIGTERM)
    rest, _ = process.communicate(timeout=60)
    assert process.returncode == 130
    deadline = time.monotonic() + 15
    while alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(server_pid), "the MCP server outlived the run"
    session_id = lines[0]["session_id"]
    log = json_lines(cli("log", session_id, "--json", db=db_url).stdout)
    assert [e["status"] for e in log if e["aggregate"] == "tool_call"][-1] == "cancelled"


def test_a_server_that_cannot_start_when_a_session_starts_is_a_usage_error_and_records_nothing(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text('[mcp.down]\ncommand = "/nonexistent/server"\n', encoding="utf-8")
    script = write_script(tmp_path / "s.json", [response(text("hi"))])
    run = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert run.returncode == 2 and "MCP server 'down'" in run.stderr and "Traceback" not in run.stderr
    assert json_lines(cli("sessions", "--json", db=db_url).stdout) == []


def test_chat_gets_the_mcp_tools_as_run_does_and_stops_the_server_when_it_leaves(db_url, workspace, tmp_path):
    pidfile = tmp_path / "server.pid"
    config(workspace, pidfile)
    script = write_script(tmp_path / "s.json", [
        [response(tool_use("u1", "t__lookup", key="abc"), tool_use("u2", "t__picture")), response(text("looked it up"))],
        [response(tool_use("u3", "t__lookup", key="abcdef")), response(text("again"))],
    ])
    chat = cli("chat", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url,
               input="look up abc\nonce more\n/quit\n", timeout=120)
    assert chat.returncode == 0, chat.stderr
    assert "t__lookup completed" in chat.stdout and "t__picture completed" in chat.stdout and "again" in chat.stdout
    session_id = json_lines(cli("sessions", "--json", db=db_url).stdout)[0]["session_id"]
    calls = [e for e in json_lines(cli("log", session_id, "--json", db=db_url).stdout)
             if e["aggregate"] == "tool_call" and e["event"] == "Completed"]
    assert [json.loads(c["data"]["output"])["value"] for c in calls if c["data"]["name"] == "t__lookup"] == [3, 6]
    server_pid = int(pidfile.read_text())
    deadline = time.monotonic() + 15
    while alive(server_pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(server_pid), "the MCP server outlived chat"


def test_a_server_that_never_answers_is_given_up_soon_after_its_startup_timeout_and_is_stopped(workspace, tmp_path):
    """A process that starts but never speaks MCP: the listing says so after startup_timeout_s, and the
    command exits within the SDK's grace period for the server, not a further 10 s wait and more."""
    pidfile = tmp_path / "mute.pid"
    (workspace / "chronicle.toml").write_text(
        f'[mcp.mute]\ncommand = "sh"\nargs = ["-c", "echo $$ > {pidfile}; exec sleep 300"]\nstartup_timeout_s = 1\n',
        encoding="utf-8",
    )
    started = time.monotonic()
    listed = cli("mcp", "list", "--workspace", str(workspace), timeout=60)
    took = time.monotonic() - started
    assert listed.returncode == 1 and "MCP server 'mute' did not start within 1 s" in listed.stdout, listed.stdout + listed.stderr
    assert took < 8, f"giving up on a server that never answered took {took:.1f} s"
    # On a loaded machine the shell may be stopped before it wrote its pid: then nothing of it runs (a shell left
    # running would write it soon after the command's exit).
    deadline = time.monotonic() + 2
    while not pidfile.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pidfile.exists() or not alive(int(pidfile.read_text())), "the server was left running"


def test_a_server_that_writes_a_banner_to_stdout_is_named_in_one_line_not_a_traceback(workspace):
    """stdout is the protocol's channel: a server printing anything else there made the SDK log a whole pydantic
    traceback under `chronicle: warning:`; the operator gets one line naming the server and what it wrote."""
    (workspace / "chronicle.toml").write_text(
        # It exits after its banner, so the SDK has read that line (it reads stdout to its end) whatever the machine's load.
        '[mcp.chatty]\ncommand = "sh"\nargs = ["-c", "echo Server ready on stdio"]\n', encoding="utf-8",
    )
    listed = cli("mcp", "list", "--workspace", str(workspace), timeout=60)
    assert listed.returncode == 1 and "MCP server 'chatty' is unavailable" in listed.stdout, listed.stdout + listed.stderr
    assert "Traceback" not in listed.stderr and "pydantic" not in listed.stderr, listed.stderr
    warned = [line for line in listed.stderr.splitlines() if "chatty" in line]
    assert warned == ["chronicle: warning: MCP server 'chatty' wrote a line to stdout that is not JSON-RPC "
                      "(its own logs belong on stderr): 'Server ready on stdio'"], listed.stderr


def test_mcp_list_without_a_chronicle_toml_says_the_file_is_missing(workspace):
    listed = cli("mcp", "list", "--workspace", str(workspace))
    assert listed.returncode == 0 and f"{workspace / 'chronicle.toml'} does not exist" in " ".join(listed.stdout.split()), listed.stdout


def test_tools_whose_names_clean_to_the_same_name_stay_distinct_and_mcp_list_says_so(db_url, workspace, tmp_path):
    """`a.b` and `a_b` both clean to `t__a_b`: one silently replaced the other in the toolbox. The one whose name
    cleaning changed gets its name's digest as a suffix, whatever order the server lists them in; each call reaches
    its own tool."""
    config(workspace)
    (workspace / "chronicle.toml").write_text((workspace / "chronicle.toml").read_text(encoding="utf-8").replace(
        "trust_annotations = true\n", 'trust_annotations = true\nenv = { MCP_TEST_CLASH = "1" }\n'), encoding="utf-8")
    listed = cli("mcp", "list", "--json", "--workspace", str(workspace))
    assert listed.returncode == 0, listed.stderr
    rows = {r["tool"]: r["name"] for r in json_lines(listed.stdout)}
    assert rows["a_b"] == "t__a_b" and rows["a.b"].startswith("t__a_b_") and len(rows["a.b"]) == len("t__a_b_") + 8
    assert f"tool 'a.b' is offered as {rows['a.b']}, as t__a_b would clash with 'a_b'" in " ".join(listed.stderr.split())

    script = write_script(tmp_path / "s.json", [response(tool_use("u1", rows["a.b"]), tool_use("u2", "t__a_b")), response(text("ok"))])
    ran = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", "--json", db=db_url)
    assert ran.returncode == 0, ran.stderr
    session_id = json_lines(ran.stdout)[0]["session_id"]
    calls = [e["data"] for e in json_lines(cli("log", session_id, "--json", db=db_url).stdout)
             if e["aggregate"] == "tool_call" and e["event"] == "Completed"]
    assert [(c["name"], c["output"]) for c in calls] == [(rows["a.b"], "dotted"), ("t__a_b", "underscored")]


def test_undo_and_redo_files_name_the_mcp_tools_not_marked_read_only_whose_effects_they_leave(db_url, workspace, tmp_path):
    """What an MCP tool did happened on its server: `undo --files` says so as it says it of `bash`, naming the tools
    (a read-only one is not counted)."""
    config(workspace)
    script = write_script(tmp_path / "s.json", [
        response(tool_use("u1", "t__echo", text="a"), tool_use("u2", "t__echo", text="b"), tool_use("u3", "t__lookup", key="k")),
        response(text("done")),
    ])
    ran = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", "--json", db=db_url)
    assert ran.returncode == 0, ran.stderr
    sid = json_lines(ran.stdout)[0]["session_id"]
    undone = cli("undo", sid, "--files", db=db_url)
    assert undone.returncode == 0, undone.stderr
    said = " ".join(undone.stderr.split())
    assert "note: 2 MCP tool call(s) not marked read-only those turns made are not reverted (t__echo ×2)" in said, said
    assert "t__lookup" not in said
    redone = cli("redo", sid, "--files", db=db_url)
    assert redone.returncode == 0 and "2 MCP tool call(s) not marked read-only those turns made are not re-run" in " ".join(
        redone.stderr.split()), redone.stderr
    plain = cli("undo", sid, db=db_url)
    assert plain.returncode == 0 and "MCP" not in plain.stderr


MUTE_LISTING = """import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("method") == "initialize":
        result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                  "serverInfo": {"name": "mute", "version": "1"}}
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
    elif "id" in msg and msg.get("method") != "tools/list":
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32601, "message": "no"}}), flush=True)
"""


def test_a_server_that_starts_but_never_lists_its_tools_is_said_to_be_that_within_its_timeout(workspace, tmp_path):
    """The handshake completes and tools/list is never answered: not "did not start", and not 30 s more."""
    server = tmp_path / "mute_listing.py"
    server.write_text(MUTE_LISTING, encoding="utf-8")
    (workspace / "chronicle.toml").write_text(
        f"[mcp.mute]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(server))}]\nstartup_timeout_s = 3\n",
        encoding="utf-8")
    started = time.monotonic()
    listed = cli("mcp", "list", "--json", "--workspace", str(workspace), timeout=60)
    took = time.monotonic() - started
    assert listed.returncode == 1, listed.stderr
    assert json_lines(listed.stdout) == [{"server": "mute", "transport": "stdio",
                                          "error": "MCP server 'mute' started but did not list its tools within 3 s"}]
    assert took < 15, f"giving up on the listing took {took:.1f} s"
