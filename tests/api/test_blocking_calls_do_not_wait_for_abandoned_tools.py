"""A blocking call (`run_sync`, `resume`) returns once its turn has ended, as `await app.run` does, even while a
sync `@tool` function its turn gave up on (a timeout, a cancel) still runs.

It used to return only once that function ended, however long after the turn: sync tools ran in the event loop's
default executor, and closing the loop of a blocking call (`asyncio.Runner`) joins every thread of it. With a tool
timeout of 2 s and a function sleeping 15 s, the turn ended at 2 s and `run_sync` at 15 s; a loop over prompts
stalled for good on a function that never returned. What docs/tools.md promises still holds: the function's late end
is recorded (ToolCall.FinishedAfterAbandon), and closing the Chronicle waits for it."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from chronicle import Agent, Chronicle, tool
from tests.helpers import response, text, tool_use

ENTERED = threading.Event()
RELEASE = threading.Event()
#: What the function returned, once it did.
ENDED: list[str] = []


@tool(timeout_s=0.3, requires_approval=True)
def send_mail(to: str) -> str:
    """Send a mail: a sync function, which its timeout cannot stop.

    Args:
        to: Whom to.
    """
    ENTERED.set()
    RELEASE.wait(30)  # the test lets it go; a blocking call that waited for it would wait this long
    ENDED.append(to)
    return f"sent to {to}"


def reset() -> None:
    ENTERED.clear(), RELEASE.clear(), ENDED.clear()


def agent(tmp_path: Path, *turns: list[dict]) -> Agent:
    """Scripted: each turn's responses."""
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": list(turns)}}), encoding="utf-8")
    return Agent(tools=[send_mail], provider=f"scripted:{path}")


def call_ends(db_url: str, session_id: str) -> list[str]:
    """How the session's tool calls ended, late ends included."""
    with Chronicle(db_url) as app:
        return [e["event"] for e in app.log(session_id)
                if e["aggregate"] == "tool_call" and e["event"] in ("Completed", "Failed", "Cancelled", "FinishedAfterAbandon")]


def test_run_sync_returns_when_the_timeout_ends_the_turn_and_the_late_end_is_recorded_at_close(db_url, workspace, tmp_path):
    reset()
    the_agent = agent(tmp_path, [response(tool_use("m", "send_mail", to="ann")), response(text("The mail timed out."))],
                      [response(text("Next prompt answered."))])
    app = Chronicle(db_url)
    try:
        first = app.run_sync(the_agent, "mail ann", workspace=str(workspace), auto_approve=True)
        assert ENTERED.is_set() and ENDED == [], "run_sync returned only once the function had ended"
        assert (first.status, first.text) == ("completed", "The mail timed out.")
        # A loop over prompts goes on: the next turn runs while the function still runs.
        second = app.run_sync(the_agent, "and then?", session=first.session_id)
        assert (second.status, second.text, ENDED) == ("completed", "Next prompt answered.", [])
    finally:
        RELEASE.set()
        app.close()  # waits for the function to end and record its late end
    assert ENDED == ["ann"]
    assert call_ends(db_url, first.session_id) == ["Failed", "FinishedAfterAbandon"]


def test_resume_returns_when_the_timeout_ends_the_turn(sqlite_url, workspace, tmp_path):
    reset()
    the_agent = agent(tmp_path, [response(tool_use("m", "send_mail", to="bob")), response(text("The mail timed out."))])
    with Chronicle(sqlite_url) as app:
        paused = app.run_sync(the_agent, "mail bob", workspace=str(workspace))  # send_mail asks for an approval first
        assert paused.status == "awaiting_approval" and not ENTERED.is_set()
        try:
            resumed = app.resume(paused.session_id, auto_approve=True)
            assert ENTERED.is_set() and ENDED == [], "resume returned only once the function had ended"
            assert (resumed.status, resumed.text) == ("completed", "The mail timed out.")
        finally:
            RELEASE.set()
    assert ENDED == ["bob"]
    assert call_ends(sqlite_url, paused.session_id) == ["Failed", "FinishedAfterAbandon"]
