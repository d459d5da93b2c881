"""Tools by import path: a session records `module:attribute`, and any process (worker, resume) loads it from there."""

from __future__ import annotations

import json
import shutil
import textwrap

from tests.helpers import cli, json_lines, response, text, tool_use, write_script

SHOP_TOOLS = '''
from chronicle import tool, ToolError


@tool(read_only=True)
def lookup_order(order_id: str) -> str:
    """Find an order by its id.

    Args:
        order_id: The order's id.
    """
    if not order_id.startswith("A-"):
        raise ToolError(f"no order {order_id}")
    return f"order {order_id}: shipped"


@tool
def refund(order_id: str, amount: float) -> dict:
    """Refund part of an order."""
    return {"order_id": order_id, "refunded": amount}


TOOLS = [lookup_order, refund]
not_a_tool = 42
'''


def shop(workspace, tools):
    (workspace / "shop_tools.py").write_text(textwrap.dedent(SHOP_TOOLS), encoding="utf-8")
    (workspace / "chronicle.toml").write_text(f"[agents.main]\ntools = {json.dumps(tools)}\n", encoding="utf-8")


def test_a_worker_process_runs_a_session_whose_agent_uses_tools_by_import_path(db_url, workspace, tmp_path):
    shop(workspace, ["shop_tools:TOOLS", "read_file"])
    script = write_script(tmp_path / "s.json", [
        response(tool_use("tu_1", "lookup_order", order_id="A-7"), tool_use("tu_2", "refund", order_id="A-7", amount="2.5")),
        response(text("Refunded.")),
    ])
    submitted = cli("submit", "refund A-7", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json",
                    db=db_url, cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stderr
    sid = json_lines(submitted.stdout)[0]["session_id"]
    worker = cli("worker", "--once", db=db_url, cwd=tmp_path)  # another process, another directory
    assert worker.returncode == 0, worker.stderr
    assert "completed" in worker.stdout + worker.stderr
    log = json_lines(cli("log", sid, "--json", db=db_url).stdout)
    outputs = {e["data"]["tool_use_id"]: e["data"]["output"] for e in log if e["event"] == "Completed" and e["aggregate"] == "tool_call"}
    assert outputs["tu_1"] == "order A-7: shipped"
    assert json.loads(outputs["tu_2"]) == {"order_id": "A-7", "refunded": 2.5}  # "2.5" validated into a float


def test_a_path_that_does_not_load_exits_2_naming_it_and_records_nothing(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("never"))])
    for entry, words in (("shop_tools:missing", "has no attribute 'missing'"), ("nowhere.mod:x", "No module named"),
                         ("shop_tools:not_a_tool", "not a tool")):
        shop(workspace, [entry])
        run = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
        assert run.returncode == 2, run.stderr
        line = run.stderr.strip()
        assert "\n" not in line and entry in line and words in line
    assert json_lines(cli("sessions", "--json", db=sqlite_url).stdout) == []


def test_a_session_whose_tool_cannot_be_loaded_any_more_refuses_to_resume_with_that_message(sqlite_url, workspace, tmp_path):
    shop(workspace, ["shop_tools:lookup_order"])
    script = write_script(tmp_path / "s.json", [response(text("one"))], )
    submitted = cli("submit", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    sid = json_lines(submitted.stdout)[0]["session_id"]
    (workspace / "shop_tools.py").unlink()
    shutil.rmtree(workspace / "__pycache__", ignore_errors=True)
    resumed = cli("resume", sid, db=sqlite_url)
    assert resumed.returncode == 2
    assert "shop_tools:lookup_order" in resumed.stderr and "No module named 'shop_tools'" in resumed.stderr
    log = json_lines(cli("log", sid, "--json", db=sqlite_url).stdout)
    assert not [e for e in log if e["aggregate"] == "turn"]  # nothing ran, nothing half-recorded


def test_run_takes_tools_by_import_path_on_the_command_line_repeatable(db_url, workspace, tmp_path):
    shop(workspace, ["read_file"])
    script = write_script(tmp_path / "s.json", [
        response(tool_use("tu_1", "lookup_order", order_id="B-1"), tool_use("tu_2", "refund", order_id="A-1", amount=1)),
        response(text("ok")),
    ])
    run = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json",
              "--tools", "shop_tools:lookup_order", "--tools", "shop_tools:refund", db=db_url)
    assert run.returncode == 0, run.stderr
    ends = {e["tool_use_id"]: e for e in json_lines(run.stdout) if e["type"] == "tool_end"}
    assert ends["tu_1"]["is_error"] and ends["tu_1"]["output"] == "no order B-1"
    assert json.loads(ends["tu_2"]["output"]) == {"order_id": "A-1", "refunded": 1.0}
    bad = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--tools", "shop_tools", db=db_url)
    assert bad.returncode == 2 and "shop_tools" in bad.stderr and "package.module:attribute" in bad.stderr
