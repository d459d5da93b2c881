"""Closing a Chronicle waits for the sync tool functions a timeout or a cancel left running to end, so their late ends
(ToolCall.FinishedAfterAbandon) are recorded before the store closes, as docs/tools.md promises.

In async code the store closed at the end of `async with` while the function still ran: it charged the card, then its
late end found the pool closed, and the log went on saying the charge may not have happened, with a traceback on
stderr. The wait is bounded (`Chronicle.late_end_wait_s`); past it the store closes without the late end, said on one
warning line."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from pathlib import Path

from chronicle import Agent, Chronicle, tool
from tests.helpers import response, text, tool_use

CHARGED: list[int] = []
#: How long charge_card takes: past its timeout, and past a close that does not wait.
TAKES_S = [1.0]


@tool(timeout_s=0.3)
def charge_card(amount: int) -> str:
    """Charge the card: a sync function, which its timeout cannot stop.

    Args:
        amount: How much.
    """
    time.sleep(TAKES_S[0])
    CHARGED.append(amount)
    return f"charged {amount}"


def agent(tmp_path: Path) -> Agent:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": [response(tool_use("c1", "charge_card", amount=42)),
                                                     response(text("The charge timed out."))]}}), encoding="utf-8")
    return Agent(tools=[charge_card], provider=f"scripted:{path}")


def late_ends(db_url: str) -> dict[str, list[str]]:
    """Each session's tool call events after its request and start."""
    with Chronicle(db_url) as app:
        return {row["session_id"]: [e["event"] for e in app.log(row["session_id"])
                                    if e["aggregate"] == "tool_call" and e["event"] not in ("Requested", "Started")]
                for row in app.sessions()}


def test_async_with_waits_for_a_timed_out_sync_tool_and_records_its_late_end(db_url, workspace, tmp_path, caplog):
    CHARGED.clear()
    TAKES_S[0] = 1.0
    the_agent = agent(tmp_path)

    async def program() -> tuple[str, list[int]]:
        async with Chronicle(db_url) as app:
            result = await app.run(the_agent, "charge 42", workspace=str(workspace))
        return result.status, list(CHARGED)  # as the block ended

    status, charged_at_close = asyncio.run(program())
    assert status == "completed" and charged_at_close == [42]
    assert list(late_ends(db_url).values()) == [["Failed", "FinishedAfterAbandon"]]
    assert not [r for r in caplog.records if "late end" in r.getMessage()]


def test_async_with_after_a_stream_let_go_of_during_the_tool_records_its_late_end(db_url, workspace, tmp_path, caplog):
    CHARGED.clear()
    TAKES_S[0] = 1.0
    the_agent = agent(tmp_path)

    async def program() -> list[int]:
        async with Chronicle(db_url) as app:
            async for event in app.stream(the_agent, "charge 42", workspace=str(workspace)):
                if event.type == "tool_start":
                    await asyncio.sleep(0.1)  # the function has begun: the cancel cannot stop it
                    break
        return list(CHARGED)

    assert asyncio.run(program()) == [42]
    assert list(late_ends(db_url).values()) == [["Cancelled", "FinishedAfterAbandon"]]
    assert not [r for r in caplog.records if "late end" in r.getMessage()]


def test_close_outside_an_event_loop_waits_for_the_late_end(db_url, workspace, tmp_path):
    """A program driving its own event loop closes the Chronicle before the loop's threads are joined."""
    CHARGED.clear()
    TAKES_S[0] = 1.0
    the_agent = agent(tmp_path)
    loop = asyncio.new_event_loop()
    try:
        app = Chronicle(db_url)
        assert loop.run_until_complete(app.run(the_agent, "charge 42", workspace=str(workspace))).status == "completed"
        app.close()
        assert CHARGED == [42]
    finally:
        loop.close()
    assert list(late_ends(db_url).values()) == [["Failed", "FinishedAfterAbandon"]]


def test_a_sync_with_inside_async_code_closes_the_store_once_the_late_end_is_recorded(db_url, workspace, tmp_path):
    """`close` inside a running loop waits on a thread of its own (the loop goes on), then closes the store."""
    CHARGED.clear()
    TAKES_S[0] = 1.0
    the_agent = agent(tmp_path)

    async def program() -> float:
        with Chronicle(db_url) as app:
            await app.run(the_agent, "charge 42", workspace=str(workspace))
            began = time.monotonic()
        return time.monotonic() - began

    assert asyncio.run(program()) < 0.5, "the block ended at once"
    for waiter in [t for t in threading.enumerate() if t.name == "chronicle-late-ends"]:
        waiter.join(30)
    assert list(late_ends(db_url).values()) == [["Failed", "FinishedAfterAbandon"]]


def test_past_the_wait_the_store_closes_without_the_late_end_and_says_so_on_one_line(db_url, workspace, tmp_path, caplog):
    CHARGED.clear()
    TAKES_S[0] = 2.0
    the_agent = agent(tmp_path)
    loop = asyncio.new_event_loop()
    try:
        app = Chronicle(db_url)
        app.late_end_wait_s = 0.2
        result = loop.run_until_complete(app.run(the_agent, "charge 42", workspace=str(workspace)))
        began = time.monotonic()
        with caplog.at_level(logging.WARNING):
            app.close()
            took = time.monotonic() - began
            for running in [t for t in threading.enumerate() if t.name == "chronicle-tool:charge_card"]:
                running.join(30)  # the function ends, after the store closed
    finally:
        loop.close()
    assert CHARGED == [42] and took < 1.5
    said = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(said) == 1 and said[0].exc_info is None, [r.getMessage() for r in said]
    with Chronicle(db_url) as reader:
        [call_id] = [e["aggregate_id"] for e in reader.log(result.session_id) if e["event"] == "Failed"]
    line = said[0].getMessage()
    assert "\n" not in line and call_id in line and "charge_card" in line and "not recorded" in line
    assert list(late_ends(db_url).values()) == [["Failed"]]
