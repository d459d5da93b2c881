"""Tools say how they are getting on: live `tool_update` events between a call's start and its end,
from a long `bash` command's output and from `ToolContext.update` in sync and async @tools; never
recorded (the result is the record)."""

from __future__ import annotations

import asyncio
import json
import time

from chronicle import Agent, Chronicle, ToolContext, tool
from tests.helpers import cli, json_lines, response, text, tool_use, write_script


@tool(read_only=True)
def crunch_sync(ctx: ToolContext) -> str:
    """Crunch numbers, slowly."""
    for part in ("loading", "crunching"):
        ctx.update(part)
        time.sleep(0.05)
    return "42"


@tool(read_only=True)
async def crunch_async(ctx: ToolContext) -> str:
    """Crunch numbers, politely."""
    ctx.update("warming up")
    await asyncio.sleep(0.05)
    return "43"


def test_a_long_bash_command_streams_its_lines_live_and_the_log_keeps_only_the_result(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [
        response(tool_use("b1", "bash", command="for i in 1 2 3 4 5 6; do echo step $i; sleep 0.15; done")), response(text("done"))])
    ran = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", "--json", db=db_url)
    assert ran.returncode == 0, ran.stderr
    events = json_lines(ran.stdout)
    kinds = [e["type"] for e in events]
    start, end = kinds.index("tool_start"), kinds.index("tool_end")
    updates = [e for e in events if e["type"] == "tool_update"]
    assert updates and all(start < events.index(u) < end for u in updates)
    assert all(u["detail"].startswith("step ") and u["tool_call_id"] == events[start]["tool_call_id"] for u in updates)
    assert [int(u["detail"].split()[1]) for u in updates] == sorted(int(u["detail"].split()[1]) for u in updates)
    log = cli("log", events[0]["session_id"], "--json", db=db_url).stdout
    assert "tool_update" not in log and "step 6" in log
    human = cli("run", "again", "--session", events[0]["session_id"], "--provider", f"scripted:{script}", "--yes", db=db_url)
    assert "│ step" in human.stdout, human.stdout


def test_a_tool_function_reports_progress_from_its_thread_or_its_coroutine(db_url, workspace, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [[
        response(tool_use("c1", "crunch_sync"), tool_use("c2", "crunch_async")), response(text("done"))]]}}))
    agent = Agent(tools=[crunch_sync, crunch_async], provider=f"scripted:{script}")
    app = Chronicle(db_url)

    async def collect():
        return [e async for e in app.stream(agent, "crunch", workspace=str(workspace))]

    events = asyncio.run(collect())
    starts = {e.tool_call_id: i for i, e in enumerate(events) if e.type == "tool_start"}
    ends = {e.tool_call_id: i for i, e in enumerate(events) if e.type == "tool_end"}
    updates = [(i, e) for i, e in enumerate(events) if e.type == "tool_update"]
    assert sorted(e.detail for _, e in updates) == ["crunching", "loading", "warming up"]
    for i, update in updates:
        assert starts[update.tool_call_id] < i < ends[update.tool_call_id], "each update between its call's start and end"
    app.close()
