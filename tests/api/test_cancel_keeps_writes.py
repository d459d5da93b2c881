"""A cancel that lands after a tool wrote a file (here: while a tool_result guardrail looks at its
result) still leaves the write on record, so `undo --files` can put the file back."""

from __future__ import annotations

import asyncio
import json
import threading

from chronicle import Agent, Chronicle, Guardrail
from tests.helpers import response, text, tool_use

LOOKING = threading.Event()


async def slow_look(text: str, where: str) -> None:
    LOOKING.set()
    await asyncio.sleep(30)  # cancelled long before


def test_a_write_a_cancel_overtook_is_recorded_and_undone_with_files(db_url, workspace, tmp_path):
    LOOKING.clear()
    (workspace / "notes.txt").write_text("before\n", encoding="utf-8")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [[
        response(tool_use("w1", "write_file", path="notes.txt", content="after\n")), response(text("never asked"))]]}}))
    agent = Agent(tools=["write_file"], provider=f"scripted:{script}",
                  guardrails=[Guardrail("slow", slow_look, on=["tool_result"])])
    app = Chronicle(db_url)

    async def scenario() -> str:
        sid = ""

        async def cancel_once_looking() -> None:
            assert await asyncio.to_thread(LOOKING.wait, 20)
            await asyncio.to_thread(app.cancel, sid, 10)

        canceller = None
        async for event in app.stream(agent, "write it", workspace=str(workspace)):
            if not sid:
                sid = event.session_id
                canceller = asyncio.ensure_future(cancel_once_looking())
        assert canceller is not None
        await canceller
        return sid

    sid = asyncio.run(scenario())
    assert (workspace / "notes.txt").read_text() == "after\n", "the write happened"
    calls = [e for e in app.log(sid) if e["aggregate"] == "tool_call"]
    assert calls[-1]["event"] == "Cancelled"
    recorded = [e for e in calls if e["event"] == "EffectsRecorded"]
    assert [(f["path"], f["after"]) for e in recorded for f in e["data"]["effects"]] == [("notes.txt", "after\n")]
    undone = app.undo(sid, files=True)
    assert undone["files"] == [{"path": "notes.txt", "action": "restored"}]
    assert (workspace / "notes.txt").read_text() == "before\n"
    app.close()
