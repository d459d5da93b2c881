"""The model sees its task board: `list_tasks` (tool edition 3) gives the task ids a `delegate` item claims,
where before only whoever ran `chronicle tasks add` knew them. On both backends, with the real loop and a
provider that reads the tool result it was given, as a model would, to pick the task it claims."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.content import ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock
from chronicle.domain.ids import child_session_id
from chronicle.runtime.agents.registry import AgentRegistry
from chronicle.runtime.app import tasks as board
from chronicle.runtime.app.replay import replay
from chronicle.runtime.live import Broker
from chronicle.runtime.loop import AgentLoop
from chronicle.runtime.providers import ScriptedProvider
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.tools import READ_ONLY_TOOLS
from chronicle.runtime.toolsets import agent_toolbox
from tests.helpers import response, tool_use

AGENTS = (AgentSpec(name="researcher", description="reads files", tools=READ_ONLY_TOOLS),)


class BoardReader(ScriptedProvider):
    """The main agent lists its board, then delegates the pending posted task it read there (its
    task_id comes from the list_tasks result, not from the test); sub-agents answer from the script."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.requests: list[Any] = []

    async def stream(self, request: Any, on_delta: Any) -> ModelResponse:
        if request.agent != "main" or request.auxiliary is not None:
            return await super().stream(request, on_delta)
        self.requests.append(request)
        if request.call_index == 0:
            return ModelResponse(content=[ToolUseBlock(id="l1", name="list_tasks", input={})], stop_reason="tool_use")
        if request.call_index == 1:
            [result] = [b for b in request.messages[-1].content if isinstance(b, ToolResultBlock)]
            waiting = [t for t in json.loads(result.content)["tasks"] if t["status"] == "pending" and t["posted"]]
            item = {"agent": waiting[0]["agent"] or "researcher", "task": waiting[0]["task"], "task_id": waiting[0]["task_id"]}
            return ModelResponse(content=[ToolUseBlock(id="d1", name="delegate", input={"tasks": [item]})], stop_reason="tool_use")
        return ModelResponse(content=[TextBlock(text="the researcher took the posted task")], stop_reason="end_turn")


def listed(store: ChronicleStore, session_id: Any) -> list[dict[str, Any]]:
    session = store.session(session_id)
    calls = [c for t in session.turns for c in store.tool_calls_of(store.turn(t)) if c.name == "list_tasks"]
    return [json.loads(c.output)["tasks"] for c in calls]


def test_the_model_lists_its_board_and_claims_the_posted_task_it_finds_there_and_replay_reads_the_list_from_the_record(
        db_url, workspace, tmp_path):
    store = ChronicleStore(db_url)
    spec = AgentRegistry(main=AgentSpec(name="main", tools=READ_ONLY_TOOLS, max_depth=1), agents=AGENTS).main_spec(
        f"scripted:{tmp_path / 'script.json'}", "scripted", str(workspace))
    assert spec.tools[-1] == "list_tasks"
    session, _ = start_session(store, spec, "take the work on your board")
    posted = board.add(store, session.id, "count the lines of hello.txt", agent="researcher")
    other = board.add(store, session.id, "audit the ledger")  # for any agent; stays pending
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agents": {"researcher": [response(tool_use("r1", "task_complete", status="completed",
                                                                               summary="2 lines"))]}}), encoding="utf-8")
    provider = BoardReader(script)
    loop = AgentLoop(store, provider, agent_toolbox(spec), workspace, broker=Broker())
    assert asyncio.run(loop.run_next(session.id)).status == "completed"

    assert "list_tasks" in [t["name"] for t in provider.requests[0].tools], "an agent that may delegate is offered list_tasks"
    [seen] = listed(store, session.id)
    assert seen == [
        {"task_id": posted["task_id"], "status": "pending", "agent": "researcher", "task": "count the lines of hello.txt",
         "posted": True, "child_session_id": None},
        {"task_id": other["task_id"], "status": "pending", "agent": None, "task": "audit the ledger", "posted": True,
         "child_session_id": None},
    ]
    delegate = next(c for t in store.session(session.id).turns for c in store.tool_calls_of(store.turn(t)) if c.name == "delegate")
    [result] = json.loads(delegate.output)["results"]
    assert (result["status"], result["task_id"], result["summary"]) == ("completed", posted["task_id"], "2 lines")
    rows = {r["task_id"]: r for r in board.listing(store, session.id)}
    assert rows[posted["task_id"]]["status"] == "completed"
    assert rows[posted["task_id"]]["child_session_id"] == str(child_session_id(delegate.id, 0))
    assert rows[other["task_id"]]["status"] == "pending"

    # The board has moved on since the model listed it (the task it claimed is completed): list_tasks run
    # again would answer otherwise, so replay answers it from the record and stays identical.
    report = asyncio.run(replay(store, session.id, workspace))
    assert report.identical, report.verdict()
    assert (report.model_calls, report.rechecked) == (3, 0) and report.reused == 2, report.verdict()
    store.close()


def test_list_tasks_shows_a_settled_task_with_its_summary_and_the_tasks_delegate_opened_and_filters_by_status(
        db_url, workspace, tmp_path):
    store = ChronicleStore(db_url)
    spec = AgentRegistry(main=AgentSpec(name="main", tools=READ_ONLY_TOOLS, max_depth=1), agents=AGENTS).main_spec(
        f"scripted:{tmp_path / 'script.json'}", "scripted", str(workspace))
    session, _ = start_session(store, spec, "delegate, then look")
    waiting = board.add(store, session.id, "later work")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agents": {
        "main": [response(tool_use("d1", "delegate", tasks=[{"agent": "researcher", "task": "read hello.txt"}])),
                 response(tool_use("l1", "list_tasks"), tool_use("l2", "list_tasks", status="pending"),
                          tool_use("l3", "list_tasks", status="completed")),
                 response({"type": "text", "text": "ok"})],
        "researcher": [response(tool_use("r1", "task_complete", status="completed", summary="it says hello"))],
    }}), encoding="utf-8")
    loop = AgentLoop(store, ScriptedProvider(script), agent_toolbox(spec), workspace, broker=Broker())
    assert asyncio.run(loop.run_next(session.id)).status == "completed"

    every, pending, completed = listed(store, session.id)
    opened = {"status": "completed", "agent": "researcher", "task": "read hello.txt", "posted": False, "summary": "it says hello"}
    assert [t["task_id"] for t in every] == [waiting["task_id"], completed[0]["task_id"]], "posted first, then those delegate opened"
    assert {k: completed[0][k] for k in opened} == opened and completed[0]["child_session_id"] is not None
    assert pending == [every[0]] and "summary" not in every[0], "a task not settled has no summary yet"
    store.close()
