"""The public API's contract: an Agent with an @tool function, run from code, recorded like `chronicle run`."""

from __future__ import annotations

import asyncio
import json

from chronicle import Agent, Chronicle, ToolContext, ToolError, tool
from chronicle.runtime.tools.base import Toolbox
from tests.helpers import cli, json_lines, response, text, tool_use


@tool(read_only=True)
def lookup_order(order_id: str, verbose: bool = False) -> str:
    """Find an order by its id.

    Args:
        order_id: The order's id, e.g. "A-42".
        verbose: Include the line items.
    """
    if not order_id.startswith("A-"):
        raise ToolError(f"no order {order_id}")
    return f"order {order_id}: shipped" + (" (2 items)" if verbose else "")


@tool(idempotent=True)
async def where_am_i(ctx: ToolContext) -> dict:
    """Report the workspace and the ids the runtime gave this call."""
    return {"workspace": ctx.workspace.name, "has_call_id": bool(ctx.tool_call_id), "session": ctx.session_id}


def script(path, name, *responses):
    path.write_text(json.dumps({"agents": {name: list(responses)}}), encoding="utf-8")
    return f"scripted:{path}"


def test_the_schema_comes_from_the_signature_and_the_google_docstring():
    (schema,) = Toolbox([lookup_order]).schemas()
    assert schema["name"] == "lookup_order"
    assert schema["description"] == "Find an order by its id."
    props = schema["input_schema"]["properties"]
    assert props["order_id"] == {"type": "string", "description": 'The order\'s id, e.g. "A-42".'}
    assert props["verbose"]["description"] == "Include the line items." and props["verbose"]["default"] is False
    assert schema["input_schema"]["required"] == ["order_id"]
    assert lookup_order("A-1") == "order A-1: shipped"  # still a plain function to call


def test_run_sync_runs_a_custom_tool_records_it_and_reports_like_run(db_url, workspace, tmp_path):
    provider = script(
        tmp_path / "s.json", "support",
        response(tool_use("tu_1", "lookup_order", order_id="A-42"), tool_use("tu_2", "lookup_order", order_id="B-1"),
                 tool_use("tu_3", "lookup_order", order_id=42), tool_use("tu_4", "where_am_i")),
        response(text("A-42 has shipped.")),
    )
    support = Agent(name="support", instructions="You answer questions about orders.",
                    tools=[lookup_order, where_am_i, "read_file"], provider=provider)
    app = Chronicle(db_url)
    result = app.run_sync(support, "Where is order A-42?", workspace=str(workspace))
    assert (result.status, result.text, result.exit_code) == ("completed", "A-42 has shipped.", 0)

    log = json_lines(cli("log", result.session_id, "--json", db=db_url).stdout)
    ends = {e["data"]["tool_use_id"]: e for e in log if e["aggregate"] == "tool_call" and e["event"] in ("Completed", "Failed")}
    assert ends["tu_1"]["data"]["output"] == "order A-42: shipped" and ends["tu_1"]["data"]["is_error"] is False
    assert ends["tu_2"]["data"]["output"] == "no order B-1" and ends["tu_2"]["data"]["is_error"] is True
    assert "order_id" in ends["tu_3"]["data"]["output"] and ends["tu_3"]["data"]["is_error"] is True  # pydantic said no
    assert json.loads(ends["tu_4"]["data"]["output"]) == {"workspace": "workspace", "has_call_id": True,
                                                         "session": result.session_id}
    shown = cli("history", result.session_id, "--json", db=db_url)
    assert shown.returncode == 0, shown.stderr
    history = json_lines(shown.stdout)
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    app.close()


def test_stream_yields_the_live_events_of_run_json_and_run_continues_the_session(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", "support",
                      [response(text("first"))], [response(tool_use("tu_1", "lookup_order", order_id="A-43")), response(text("second"))],
                      [response(text("third"))])
    support = Agent(name="support", tools=[lookup_order], provider=provider)
    app = Chronicle(db_url)
    first = app.run_sync(support, "hi", workspace=str(workspace))

    async def go():
        events = [e async for e in app.stream(support, "and A-43?", session=first.session_id)]
        outcome = await app.run(support, "thanks", session=first.session_id)
        return events, outcome

    events, outcome = asyncio.run(go())
    types = [e.type for e in events]
    assert types[0] == "agent_start" and types[-1] == "agent_end" and "tool_end" in types
    tool_end = next(e for e in events if e.type == "tool_end")
    assert tool_end.model_dump()["output"] == "order A-43: shipped"
    assert json.loads(tool_end.model_dump_json()) == tool_end.model_dump()
    assert outcome.text == "third" and outcome.session_id == first.session_id
    app.close()
