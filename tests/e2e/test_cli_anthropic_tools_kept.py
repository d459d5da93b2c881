"""A continued session's requests always define tools while its history holds tool blocks.

The Messages API refuses a request whose messages hold tool_use/tool_result blocks and that defines
no tools (tests/sse_server.py, TOOLS_REQUIRED). A session's toolbox is rebuilt in every process from
the tools its spec recorded when it started (no event changes the spec), so a chronicle.toml that
now gives the agent no tools, or a fork, does not empty it; a tool path that now loads no tool at
all is refused before anything is sent or recorded, as one that does not import is.
"""

from __future__ import annotations

import json
import textwrap

from tests.e2e.test_cli_anthropic import env_for
from tests.helpers import cli, json_lines
from tests.sse_server import reply, sse  # noqa: F401

MODEL = "claude-sonnet-4-6"

SHOP = '''
from chronicle import tool


@tool(read_only=True)
def lookup_order(order_id: str) -> str:
    """Find an order by its id."""
    return f"order {order_id}: shipped"


TOOLS = [lookup_order]
'''


def shop(workspace, tools, module=SHOP):
    (workspace / "shop_tools.py").write_text(textwrap.dedent(module), encoding="utf-8")
    (workspace / "chronicle.toml").write_text(f"[agents.main]\ntools = {json.dumps(tools)}\n", encoding="utf-8")


def first_turn(db, workspace, sse):  # noqa: F811
    sse.script(reply([{"type": "tool_use", "id": "tu_1", "name": "lookup_order", "input": {"order_id": "A-7"}}], model=MODEL),
               reply([{"type": "text", "text": "Shipped."}], model=MODEL))
    run = cli("run", "where is A-7", "--provider", "anthropic", "--model", MODEL, "--workspace", str(workspace), "--json",
              db=db, env=env_for(sse))
    assert run.returncode == 0, run.stderr
    return json_lines(run.stdout)[0]["session_id"]


def test_a_session_continued_or_forked_after_the_agent_lost_its_tools_still_sends_the_recorded_ones(db_url, workspace, sse):  # noqa: F811
    shop(workspace, ["shop_tools:TOOLS"])
    sid = first_turn(db_url, workspace, sse)
    shop(workspace, [])  # chronicle.toml now gives the main agent no tools at all
    sse.script(reply([{"type": "text", "text": "Still shipped."}], model=MODEL))
    again = cli("run", "and now?", "--session", sid, "--agents", str(workspace / "chronicle.toml"), "--json", db=db_url, env=env_for(sse))
    assert again.returncode == 0, again.stderr
    forked = cli("fork", sid, "--at", "1", "--json", db=db_url)
    assert forked.returncode == 0, forked.stderr
    fork_id = json.loads(forked.stdout)["session_id"]
    sse.script(reply([{"type": "text", "text": "Forked."}], model=MODEL))
    on_fork = cli("run", "and on the fork?", "--session", fork_id, "--json", db=db_url, env=env_for(sse))
    assert on_fork.returncode == 0, on_fork.stderr
    assert not sse.refused, [r.body for r in sse.refused]
    assert [[t["name"] for t in r.body["tools"]] for r in sse.requests[2:]] == [["lookup_order"], ["lookup_order"]]


def test_a_tool_path_that_now_loads_no_tool_refuses_to_continue_the_session_before_a_request(sqlite_url, workspace, sse):  # noqa: F811
    shop(workspace, ["shop_tools:TOOLS"])
    sid = first_turn(sqlite_url, workspace, sse)
    (workspace / "shop_tools.py").write_text("TOOLS = []\n", encoding="utf-8")  # every tool of the list was taken out
    sent = len(sse.requests)
    again = cli("run", "and now?", "--session", sid, db=sqlite_url, env=env_for(sse))
    assert again.returncode == 2, again.stderr
    line = again.stderr.strip()
    assert "\n" not in line and "shop_tools:TOOLS" in line and "no tool" in line
    assert len(sse.requests) == sent and not sse.refused
    log = json_lines(cli("log", sid, "--json", db=sqlite_url).stdout)
    assert [e["event"] for e in log if "and now?" in json.dumps(e["data"])] == []  # the input is not even queued


def test_a_new_session_whose_tool_path_loads_no_tool_exits_2_and_records_nothing(sqlite_url, workspace, sse):  # noqa: F811
    shop(workspace, ["shop_tools:TOOLS"], module="TOOLS = []\n")
    run = cli("run", "hi", "--provider", "anthropic", "--workspace", str(workspace), db=sqlite_url, env=env_for(sse))
    assert run.returncode == 2, run.stderr
    assert "shop_tools:TOOLS" in run.stderr and not sse.requests
    assert json_lines(cli("sessions", "--json", db=sqlite_url).stdout) == []
