"""@tool at its edges: sys.exit and KeyboardInterrupt in a tool, forward references, positional-only parameters,
partials, results that are bytes or dicts shaped like blocks, arguments checked before approval, sub-agent and MCP
server definitions checked where they are written."""

from __future__ import annotations

import functools
import json
import sys

import pytest
from pydantic import BaseModel

from chronicle import Agent, Chronicle, ChronicleError, McpServer, ToolContext, tool
from tests.helpers import cli, json_lines, response, text, tool_use


@tool
def leave(code: int) -> str:
    """Exit as a script would."""
    sys.exit(code)


@tool
async def leave_async() -> str:
    """Exit from a coroutine."""
    raise SystemExit("bye")


@tool
def interrupt() -> str:
    """Raise what Ctrl-C raises."""
    raise KeyboardInterrupt


@tool
def add(a: int, /, b: int = 2) -> int:
    """Add."""
    return a + b


@tool
def give_bytes(valid: bool) -> bytes:
    """Bytes."""
    return "héllo".encode() if valid else b"\xff\xfe\x00"


@tool
def rows(kind: str) -> list:
    """Rows shaped like blocks."""
    if kind == "text":
        return [{"type": "text", "text": "hello", "id": "1", "author": "bob"}]
    return [{"type": "image", "name": "cat.png"}]


@tool
def measure() -> dict:
    """Figures a computation could not make."""
    return {"mean": float("nan"), "range": [float("-inf"), float("inf")], "n": 0}


@tool(requires_approval=True)
def refund(order_id: str, amount: float) -> str:
    """Refund."""
    return f"refunded {amount} on {order_id}"


def script(path, *turns) -> str:
    path.write_text(json.dumps({"agents": {"main": list(turns)}}), encoding="utf-8")
    return f"scripted:{path}"


def ends(db_url: str, sid: str) -> list[dict]:
    log = json_lines(cli("log", sid, "--json", db=db_url).stdout)
    return [e for e in log if e["aggregate"] == "tool_call"]


def results(db_url: str, sid: str) -> dict[str, tuple[str, str]]:
    return {e["data"]["tool_use_id"]: (e["event"], e["data"].get("output") or e["data"].get("error"))
            for e in ends(db_url, sid) if e["event"] in ("Completed", "Failed")}


def test_sys_exit_in_a_tool_is_an_error_result_and_the_program_goes_on(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [response(tool_use("tu_1", "leave", code=3), tool_use("tu_2", "leave_async")),
                                            response(text("went on"))])
    app = Chronicle(db_url)
    done = app.run_sync(Agent(tools=[leave, leave_async], provider=provider), "go", workspace=str(workspace))
    assert (done.status, done.text) == ("completed", "went on")
    found = results(db_url, done.session_id)
    assert found["tu_1"] == ("Failed", "leave called sys.exit(3)")
    assert found["tu_2"] == ("Failed", "leave_async called sys.exit('bye')")
    app.close()


def test_keyboard_interrupt_in_a_tool_cancels_the_turn_recorded_then_interrupts_the_program(sqlite_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [response(tool_use("tu_1", "interrupt")), response(text("never"))])
    app = Chronicle(sqlite_url)
    with pytest.raises(KeyboardInterrupt):
        app.run_sync(Agent(tools=[interrupt], provider=provider), "go", workspace=str(workspace))
    (row,) = app.sessions()
    log = app.log(row["session_id"])
    ended = [e for e in log if e["aggregate"] == "turn" and e["event"] == "Cancelled"]
    assert ended and "interrupt raised KeyboardInterrupt" in json.dumps(ended[0]["data"])
    app.close()


def test_a_type_that_cannot_be_resolved_is_refused_at_definition_naming_the_parameter():
    class Item(BaseModel):  # defined inside a function: with postponed annotations, "Item" names nothing in the module
        name: str

    with pytest.raises(ChronicleError) as refused:
        @tool
        def add_item(item: Item, ctx: ToolContext) -> str:
            """Add an item."""
            return item.name

    assert refused.value.code == 2
    assert "parameter 'item': cannot resolve its type 'Item'" in str(refused.value)
    assert "module's top level" in str(refused.value)


def test_positional_only_parameters_are_passed_by_position_and_a_partial_is_refused(sqlite_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [response(tool_use("tu_1", "add", a=1), tool_use("tu_2", "add", a=1, b=5)),
                                            response(text("ok"))])
    app = Chronicle(sqlite_url)
    done = app.run_sync(Agent(tools=[add], provider=provider), "go", workspace=str(workspace))
    assert results(sqlite_url, done.session_id) == {"tu_1": ("Completed", "3"), "tu_2": ("Completed", "6")}
    app.close()

    def base(order_id: str, tenant: str) -> str:
        return order_id

    with pytest.raises(ChronicleError) as refused:
        tool(name="x")(functools.partial(base, tenant="acme"))
    assert refused.value.code == 2 and "not partial; wrap it in one" in str(refused.value)


def test_results_bytes_and_dicts_shaped_like_blocks(sqlite_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [response(tool_use("tu_1", "give_bytes", valid=True), tool_use("tu_2", "give_bytes", valid=False),
                                                     tool_use("tu_3", "rows", kind="text"), tool_use("tu_4", "rows", kind="image")),
                                            response(text("ok"))])
    app = Chronicle(sqlite_url)
    done = app.run_sync(Agent(tools=[give_bytes, rows], provider=provider), "go", workspace=str(workspace))
    found = results(sqlite_url, done.session_id)
    assert found["tu_1"] == ("Completed", "héllo")
    assert found["tu_2"][0] == "Failed" and "returned 3 bytes that are not UTF-8 text" in found["tu_2"][1]
    assert "raised" not in found["tu_2"][1]
    assert json.loads(found["tu_3"][1]) == [{"type": "text", "text": "hello", "id": "1", "author": "bob"}]  # nothing dropped
    assert found["tu_4"] == ("Completed", json.dumps([{"type": "image", "name": "cat.png"}]))
    app.close()


def test_a_result_with_nan_or_infinity_is_sent_as_json_the_model_can_parse(sqlite_url, workspace, tmp_path):
    """`json.dumps` writes NaN and Infinity as bare words, which no JSON parser reads, while the model is told a
    dict result is JSON: they go as the strings JavaScript names them."""
    provider = script(tmp_path / "s.json", [response(tool_use("tu_1", "measure")), response(text("ok"))])
    with Chronicle(sqlite_url) as app:
        done = app.run_sync(Agent(tools=[measure], provider=provider), "go", workspace=str(workspace))
    event, output = results(sqlite_url, done.session_id)["tu_1"]
    assert event == "Completed"
    assert json.loads(output, parse_constant=lambda word: pytest.fail(f"not JSON: {word}")) == {
        "mean": "NaN", "range": ["-Infinity", "Infinity"], "n": 0}


def test_invalid_arguments_fail_at_once_without_asking_for_approval(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [response(tool_use("tu_1", "refund", order_id="A-43", amount="lots")),
                                            response(text("sorry"))])
    app = Chronicle(db_url)
    done = app.run_sync(Agent(tools=[refund], provider=provider), "refund", workspace=str(workspace))
    assert (done.status, done.text) == ("completed", "sorry")  # no one was asked
    events = [e["event"] for e in ends(db_url, done.session_id)]
    assert "ApprovalRequested" not in events and "Failed" in events
    assert "invalid arguments for refund: amount" in results(db_url, done.session_id)["tu_1"][1]
    app.close()


def test_sub_agent_and_mcp_server_definitions_are_checked_where_written():
    with pytest.raises(ChronicleError) as refused:
        Agent(agents=[Agent(name="local", provider="openai-compatible", model="llama3")])
    assert refused.value.code == 2 and "sub-agents run on their parent's provider" in str(refused.value)
    Agent(provider="anthropic", agents=[Agent(name="same", provider="anthropic", model="claude-haiku-4-5")])  # the same one
    with pytest.raises(ChronicleError) as refused:
        Agent(agents=[Agent(name="clerk"), Agent(name="clerk", instructions="other")])
    assert "two sub-agents are named 'clerk'" in str(refused.value)
    with pytest.raises(ChronicleError) as refused:
        McpServer(name="my kb", command="x")
    assert refused.value.code == 2 and "letters, digits" in str(refused.value)
    with pytest.raises(ChronicleError) as refused:
        McpServer(name="k" * 70, command="x")
    assert "at most 32 characters long (this one has 70)" in str(refused.value)


def test_parameters_named_like_pydantic_methods_take_their_values_without_a_warning(sqlite_url, workspace, tmp_path):
    """`json`, `schema`, `copy`, `model_name` are fine parameter names for a program; they shadow names of the
    pydantic model Chronicle builds for the arguments, whose warnings reached the program as if its tool were wrong."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")

        @tool
        def export_rows(json: str, schema: str, copy: bool, model_name: str = "m") -> str:
            """Export."""
            return f"{json}|{schema}|{copy}|{model_name}"

    assert [str(w.message) for w in caught] == []
    provider = script(tmp_path / "s.json", [response(tool_use("tu_1", "export_rows", json="j", schema="s", copy=True,
                                                              model_name="n")), response(text("ok"))])
    with Chronicle(sqlite_url) as app:
        done = app.run_sync(Agent(tools=[export_rows], provider=provider), "go", workspace=str(workspace))
    assert results(sqlite_url, done.session_id)["tu_1"] == ("Completed", "j|s|True|n")
