"""@tool: schemas from NumPy and reST docstrings, pydantic arguments and results, flags and timeouts in the real loop."""

from __future__ import annotations

import asyncio
import json
from typing import Literal

import pytest
from pydantic import BaseModel

from chronicle import ToolError, tool
from chronicle.domain.ids import tool_call_id
from chronicle.runtime.attachments import load_data
from chronicle.runtime.tools.base import Toolbox
from tests.helpers import response, text, tool_use
from tests.integration.loop_harness import Harness


class Address(BaseModel):
    city: str
    zip_code: str


class Quote(BaseModel):
    city: str
    days: int


@tool(read_only=True, parallel_safe=True)
def shipping_quote(address: Address, speed: Literal["standard", "express"] = "standard") -> Quote:
    """Quote a delivery time.

    Parameters
    ----------
    address
        Where the parcel goes.
    speed
        How fast it should get there.
    """
    return Quote(city=address.city, days=1 if speed == "express" else 4)


@tool(timeout_s=0.2)
async def slow_export(rows: int) -> str:
    """Export rows to the warehouse.

    :param rows: How many rows to send.
    """
    await asyncio.sleep(30)
    return "never"


@tool(idempotent=True, name="tag_order")
def tag(order_id: str, tags: list[str]) -> list[dict]:
    """Tag an order."""
    if not tags:
        raise ToolError("give at least one tag")
    return [{"type": "text", "text": f"{order_id}: {', '.join(tags)}"}]


def test_numpy_and_rest_docstrings_describe_the_parameters_and_nested_models_are_in_the_schema():
    quote, export, tagger = Toolbox([shipping_quote, slow_export, tag]).schemas()
    props = quote["input_schema"]["properties"]
    assert props["speed"]["enum"] == ["standard", "express"] and props["speed"]["description"] == "How fast it should get there."
    assert props["address"]["description"] == "Where the parcel goes."
    assert quote["input_schema"]["$defs"]["Address"]["required"] == ["city", "zip_code"]
    assert export["input_schema"]["properties"]["rows"] == {"type": "integer", "description": "How many rows to send."}
    assert tagger["name"] == "tag_order" and tagger["description"] == "Tag an order."
    assert shipping_quote.flags() == {"read_only": True, "requires_approval": False, "idempotent": False, "parallel_safe": True}


def test_in_the_loop_arguments_are_validated_results_become_text_and_a_slow_tool_times_out(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("tu_1", "shipping_quote", address={"city": "Lyon", "zip_code": "69001"}, speed="express"),
                 tool_use("tu_2", "shipping_quote", address={"city": "Lyon"}),
                 tool_use("tu_3", "tag_order", order_id="A-1", tags=["fragile", "gift"]),
                 tool_use("tu_4", "tag_order", order_id="A-1", tags=[]),
                 tool_use("tu_5", "slow_export", rows=3)),
        response(text("done")),
    ], tools=(shipping_quote.import_path, tag.import_path, slow_export.import_path))
    assert h.run("ship it").status == "completed"
    results = {r.tool_use_id: r for r in h.results()}
    assert json.loads(results["tu_1"].content) == {"city": "Lyon", "days": 1} and not results["tu_1"].is_error
    assert results["tu_2"].is_error and "address.zip_code" in results["tu_2"].content
    assert results["tu_3"].content == "A-1: fragile, gift"
    assert results["tu_4"].is_error and results["tu_4"].content == "give at least one tag"
    assert results["tu_5"].is_error and results["tu_5"].content == "slow_export timed out after 0.2 s"


def test_the_flags_are_recorded_on_each_call_so_recovery_knows_what_may_run_again(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [response(tool_use("tu_1", "tag_order", order_id="A-1", tags=["x"])),
                                              response(text("ok"))], tools=(tag.import_path,))
    h.run("tag")
    turn_id = h.store.session(h.session_id).turns[0]
    call = h.store.find_tool_call(tool_call_id(turn_id, 0, "tu_1"))
    assert call is not None and call.status == "completed"
    assert call.idempotent and call.flags["idempotent"] and not call.flags["read_only"]


def test_the_decorator_refuses_what_it_cannot_describe():
    with pytest.raises(TypeError, match="name the parameters"):
        tool(lambda *args: None)
    with pytest.raises(ValueError, match="timeout_s"):
        tool(timeout_s=0)(lambda: None)


@tool(read_only=True)
def render_chart(title: str) -> list:
    """Draw a chart."""
    return [{"type": "text", "text": f"chart {title}"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}]


def test_content_blocks_reach_the_model_as_text_with_a_note_and_the_image_is_stored_once_by_content(db_url, workspace, tmp_path):
    h = Harness(db_url, workspace, tmp_path, [response(tool_use("tu_1", "render_chart", title="sales")), response(text("ok"))],
                tools=(render_chart.import_path,))
    h.run("chart")
    (result,) = h.results()
    assert result.content == "chart sales\n[image: image/png, 9 bytes]" and not result.is_error
    call = h.store.find_tool_call(tool_call_id(h.store.session(h.session_id).turns[0], 0, "tu_1"))
    assert call is not None
    source = call.blocks[1]["source"]
    assert source["type"] == "attachment" and "data" not in source, "the call records a reference, not the bytes"
    assert load_data(h.store, source["sha256"]) == "iVBORw0KGgo="


@tool(read_only=True)
def broken_chart(kind: str) -> list:
    """Draw a chart badly."""
    sources = {"none": None, "garbage": {"type": "base64", "media_type": "image/png", "data": "!!!not base64"},
               "untyped": {"type": "base64", "data": "iVBORw0KGgo="}, "unknown": {"type": "file", "path": "/x.png"}}
    return [{"type": "text", "text": "chart"}, {"type": "image", "source": sources[kind]}]


@pytest.mark.parametrize("kind, says", [("none", "its source must be one of base64, url"), ("garbage", "its data is not base64"),
                                        ("untyped", "a base64 source needs its media_type"), ("unknown", "its source must be one of")])
def test_a_malformed_image_block_is_the_tools_error_not_a_success(db_url, workspace, tmp_path, kind, says):
    h = Harness(db_url, workspace, tmp_path, [response(tool_use("tu_1", "broken_chart", kind=kind)), response(text("ok"))],
                tools=(broken_chart.import_path,))
    h.run("chart")
    (result,) = h.results()
    assert result.is_error and f"the tool returned a malformed image block: {says}" in result.content


def test_a_name_the_messages_api_would_refuse_is_refused_when_decorating():
    with pytest.raises(ValueError, match="@tool\\(name=...\\)"):
        tool(lambda: None)
    assert tool(name="answer")(lambda: 42).name == "answer"
