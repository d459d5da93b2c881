"""A sync @tool function runs in a thread, and Python cannot stop a thread: a cancel or a timeout stops the
turn waiting for it, not the function. The record says so, and the function's late end is recorded on its
call (ToolCall.FinishedAfterAbandon), so the log never claims a side effect did not happen when it did.
An async tool is cancelled for real, and its record says only that."""

from __future__ import annotations

import asyncio
import json
import threading
import time

from chronicle import Agent, Chronicle, ToolContext, tool
from tests.helpers import response, text, tool_use

API_KEY = "sk-ant-api03-" + "Zq7" * 12

ENTERED = threading.Event()
RELEASE = threading.Event()
CHARGED: list[int] = []
SESSION: list[str] = []


@tool()
def charge_card(amount: int, ctx: ToolContext) -> str:
    """Charge the card (a side effect that must not run twice).

    Args:
        amount: How much.
    """
    SESSION.append(ctx.session_id)
    ENTERED.set()
    RELEASE.wait(20)
    CHARGED.append(amount)
    return f"charged {amount} with key {API_KEY}"


@tool()
async def charge_card_async(amount: int) -> str:
    """Charge the card, politely: an async function that a cancel stops.

    Args:
        amount: How much.
    """
    ENTERED.set()
    await asyncio.sleep(20)
    CHARGED.append(amount)
    return "charged"


@tool(read_only=True, timeout_s=0.2)
def slow_lookup() -> str:
    """Look something up, slowly."""
    time.sleep(0.6)
    return "found it late"


@tool(read_only=True, timeout_s=0.2)
def slow_failure() -> str:
    """Fail, slowly."""
    time.sleep(0.6)
    raise ValueError("the lookup broke")


@tool(read_only=True, timeout_s=0.2)
async def slow_async() -> str:
    """An async lookup that a timeout stops."""
    await asyncio.sleep(5)
    return "never"


def script(path, *responses):
    path.write_text(json.dumps({"agents": {"main": list(responses)}}), encoding="utf-8")
    return f"scripted:{path}"


def tool_events(app, sid):
    return [e for e in app.log(sid) if e["aggregate"] == "tool_call" and e["event"] not in ("Requested", "Started")]


def cancel_when_entered(app, seen):
    """From another thread, as `chronicle cancel` would: cancel once the tool runs, note what the log says
    then, and only then let the function go on."""
    def cancel():
        assert ENTERED.wait(20)
        seen["cancel"] = app.cancel(SESSION[-1], wait_s=10)
        seen["log"] = tool_events(app, SESSION[-1])
        seen["charged"] = list(CHARGED)
        RELEASE.set()

    thread = threading.Thread(target=cancel)
    thread.start()
    return thread


def test_a_cancelled_sync_tool_is_recorded_as_left_running_and_its_late_end_is_recorded(db_url, workspace, tmp_path):
    ENTERED.clear(), RELEASE.clear(), CHARGED.clear(), SESSION.clear()
    agent = Agent(tools=[charge_card], provider=script(tmp_path / "s.json", response(tool_use("c1", "charge_card", amount=42)),
                                                       response(text("never asked"))))
    app = Chronicle(db_url)
    seen: dict = {}
    canceller = cancel_when_entered(app, seen)
    result = app.run_sync(agent, "charge 42", workspace=str(workspace))
    canceller.join(20)
    assert result.status == "cancelled" and seen["cancel"]["status"] == "cancelled"
    app.close()  # waits for the function left running to end and record its late end

    # When the turn ended, the function had not finished: the record says it may still complete its effects.
    assert seen["charged"] == []
    [cancelled] = seen["log"]
    assert cancelled["event"] == "Cancelled"
    reason = cancelled["data"]["reason"]
    assert "charge_card could not be stopped" in reason and "may still complete its effects" in reason

    # It did: the charge happened, and its late end is on the call, after the cancel, secrets cut out.
    assert CHARGED == [42]
    events = tool_events(app, result.session_id)
    assert [e["event"] for e in events] == ["Cancelled", "SecretsRedacted", "FinishedAfterAbandon"]
    assert events[1]["data"]["where"] == "late output"
    late = events[2]["data"]
    assert late["raised"] is False and late["output"].startswith("charged 42 with key ") and API_KEY not in late["output"]
    assert late["duration_ms"] > 0
    rows = [r for r in app.audit(session=result.session_id) if r["tool_call_id"] == events[2]["aggregate_id"]]
    assert [(r["kind"], r["status"], r["is_error"]) for r in rows] == [
        ("tool_call", "cancelled", False), ("secrets_redacted", "secrets_redacted", False), ("tool_finished_late", "completed", False)]
    assert rows[2]["detail"]["output"] == late["output"]


def test_a_cancelled_async_tool_is_stopped_and_recorded_as_cancelled_only(db_url, workspace, tmp_path):
    ENTERED.clear(), RELEASE.clear(), CHARGED.clear(), SESSION.clear()
    agent = Agent(tools=[charge_card_async], provider=script(tmp_path / "s.json",
                                                             response(tool_use("c1", "charge_card_async", amount=7))))
    app = Chronicle(db_url)

    async def scenario():
        sid = None
        async for event in app.stream(agent, "charge 7", workspace=str(workspace)):
            if event.type == "tool_start":
                sid = event.session_id
                SESSION.append(sid)
                await asyncio.to_thread(app.cancel, sid, 10)
        return sid

    sid = asyncio.run(scenario())
    [cancelled] = tool_events(app, sid)
    assert (cancelled["event"], cancelled["data"]["reason"]) == ("Cancelled", "cancelled by request")  # as the turn says
    assert CHARGED == []


def test_a_sync_tool_that_times_out_is_recorded_as_left_running_and_its_late_end_or_error_is_recorded(db_url, workspace, tmp_path):
    agent = Agent(tools=[slow_lookup, slow_failure, slow_async], provider=script(
        tmp_path / "s.json",
        response(tool_use("a", "slow_lookup"), tool_use("b", "slow_failure"), tool_use("c", "slow_async")),
        response(text("Both timed out."))))
    app = Chronicle(db_url)
    result = app.run_sync(agent, "look up", workspace=str(workspace))
    assert result.status == "completed"
    app.close()  # waits for the functions left running to end and record their late ends
    events = tool_events(app, result.session_id)
    failed = {e["data"]["name"]: e["data"]["error"] for e in events if e["event"] == "Failed"}
    for name in ("slow_lookup", "slow_failure"):
        assert failed[name].startswith(f"{name} timed out after 0.2 s") and "may still complete its effects" in failed[name]
    assert failed["slow_async"] == "slow_async timed out after 0.2 s"  # stopped for real

    late = {e["aggregate_id"]: e["data"] for e in events if e["event"] == "FinishedAfterAbandon"}
    calls = {e["aggregate_id"]: e["data"]["name"] for e in events if e["event"] == "Failed"}
    assert sorted(calls[cid] for cid in late) == ["slow_failure", "slow_lookup"]
    by_name = {calls[cid]: data for cid, data in late.items()}
    assert (by_name["slow_lookup"]["raised"], by_name["slow_lookup"]["output"]) == (False, "found it late")
    assert by_name["slow_failure"]["raised"] is True
    assert by_name["slow_failure"]["output"] == "slow_failure raised ValueError: the lookup broke"
    audit = [r for r in app.audit(session=result.session_id) if r["kind"] == "tool_finished_late"]
    assert sorted((r["name"], r["status"], r["is_error"]) for r in audit) == [
        ("slow_failure", "failed", True), ("slow_lookup", "completed", False)]


@tool(read_only=True)
async def batch_of_slow_ones(ctx: ToolContext) -> str:
    """Run a slow sync lookup and a slow async one as subtasks."""
    outputs = await ctx.spawn_batch([("slow_lookup", {}), ("slow_async", {})])
    return json.dumps([o.content for o in outputs])


def test_a_subtask_whose_sync_function_times_out_says_it_could_not_be_stopped(sqlite_url, workspace, tmp_path):
    agent = Agent(tools=[batch_of_slow_ones, slow_lookup, slow_async], provider=script(
        tmp_path / "s.json", response(tool_use("a", "batch_of_slow_ones")), response(text("ok"))))
    app = Chronicle(sqlite_url)
    result = app.run_sync(agent, "batch", workspace=str(workspace))
    [row] = app.audit(session=result.session_id, tool="batch_of_slow_ones")
    sync_slot, async_slot = json.loads(row["detail"]["output"])
    assert sync_slot.startswith("slow_lookup timed out after 0.2 s") and "could not be stopped" in sync_slot
    assert async_slot == "slow_async timed out after 0.2 s"
