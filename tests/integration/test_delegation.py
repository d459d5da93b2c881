"""Delegation on the real stores: depth and self-delegation refused, nested children rolled up
through their parent links, task_complete's end of turn seen by a resumed process, cancel."""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from uuid import UUID

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.content import ModelResponse, ToolUseBlock, Usage
from chronicle.domain.ids import tool_call_id, turn_id
from chronicle.domain.tool_call import ToolCall
from chronicle.domain.turn import Turn
from chronicle.runtime.agents.registry import AgentRegistry, child_spec
from chronicle.runtime.agents.tree import own_usage, tree_usage, walk
from chronicle.runtime.clock import SYSTEM_CLOCK
from chronicle.runtime.live import Broker
from chronicle.runtime.loop import AgentLoop
from chronicle.runtime.providers import ScriptedProvider
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.tools import READ_ONLY_TOOLS
from chronicle.runtime.toolsets import toolbox_for
from tests.helpers import response, text, tool_use

RESEARCHER = AgentSpec(name="researcher", description="reads files", tools=READ_ONLY_TOOLS)


def setup(db_url, workspace, tmp_path, script: dict, agents=(RESEARCHER,), main_depth: int = 1, spec: AgentSpec | None = None):
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"agents": script}), encoding="utf-8")
    store = ChronicleStore(db_url)
    registry = AgentRegistry(main=AgentSpec(name="main", tools=READ_ONLY_TOOLS, max_depth=main_depth), agents=tuple(agents))
    spec = spec or registry.main_spec(f"scripted:{path}", "scripted", str(workspace))
    events: list = []
    broker = Broker()
    broker.subscribe(events.append)
    loop = AgentLoop(store, ScriptedProvider(path), toolbox_for(spec.tools), workspace, broker=broker)
    session, _ = start_session(store, spec, "go")
    return store, loop, session, events


def tool_output(store: ChronicleStore, session_id: UUID, name: str) -> ToolCall:
    session = store.session(session_id)
    return next(c for t in session.turns for c in store.tool_calls_of(store.turn(t)) if c.name == name)


def test_self_delegation_and_unknown_agents_are_refused_before_any_child_starts(db_url, workspace, tmp_path):
    store, loop, session, _ = setup(db_url, workspace, tmp_path, {
        "main": [response(tool_use("d1", "delegate", tasks=[{"agent": "researcher", "task": "a"}, {"agent": "Main", "task": "b"}])),
                 response(tool_use("d2", "delegate", tasks=[{"agent": "ghost", "task": "c"}])),
                 response(text("fine"))],
    })
    outcome = asyncio.run(loop.run_next(session.id))
    assert outcome.status == "completed"
    calls = store.tool_calls_of(store.turn(store.session(session.id).turns[0]))
    assert calls[0].is_error and "cannot delegate to itself" in calls[0].output
    assert calls[1].is_error and "no agent named 'ghost'" in calls[1].output and "researcher" in calls[1].output
    assert len(store.session_ids()) == 1, "a refused delegation must start no child"


def test_an_agent_at_its_depth_limit_is_refused_even_if_it_holds_the_delegate_tool(db_url, workspace, tmp_path):
    forged = AgentSpec(name="main", tools=("delegate", "list_agents"), depth=1, max_depth=1, registry=(RESEARCHER,), provider="x")
    store, loop, session, _ = setup(db_url, workspace, tmp_path, {
        "main": [response(tool_use("l1", "list_agents"), tool_use("d1", "delegate", tasks=[{"agent": "researcher", "task": "a"}])),
                 response(text("ok"))],
    }, spec=forged)
    asyncio.run(loop.run_next(session.id))
    assert "depth limit" in tool_output(store, session.id, "list_agents").output
    refused = tool_output(store, session.id, "delegate")
    assert refused.is_error and "delegation refused" in refused.output and "depth 1" in refused.output
    assert len(store.session_ids()) == 1


def test_nested_children_roll_their_usage_up_to_the_top_through_parent_links(db_url, workspace, tmp_path):
    planner = AgentSpec(name="planner", description="plans", tools=READ_ONLY_TOOLS, max_depth=2)
    store, loop, session, _ = setup(db_url, workspace, tmp_path, {
        "main": [response(tool_use("l1", "list_agents"), usage=(5, 1)),
                 response(tool_use("d1", "delegate", tasks=[{"agent": "planner", "task": "plan it"}]), usage=(10, 2)),
                 response(text("done"), usage=(20, 3))],
        "planner": [response(tool_use("d2", "delegate", tasks=[{"agent": "researcher", "task": "look"}]), usage=(100, 10)),
                    response(tool_use("c1", "task_complete", status="completed", summary="planned"), usage=(200, 20))],
        "researcher": [response(tool_use("c2", "task_complete", status="completed", summary="looked"), usage=(1000, 100))],
    }, agents=(planner, RESEARCHER), main_depth=2)
    assert asyncio.run(loop.run_next(session.id)).status == "completed"
    listing = tool_output(store, session.id, "list_agents").output
    assert "- planner: plans" in listing and "- researcher: reads files" in listing and "main" not in listing

    sessions = [store.session(s) for s in store.session_ids()]
    assert len(sessions) == 3
    by_parent: dict = defaultdict(list)
    for s in sessions:
        by_parent[s.parent_session_id].append(s)

    def rolled_up(s) -> int:
        usage = own_usage(store, s)
        return usage.input_tokens + usage.output_tokens + sum(rolled_up(c) for c in by_parent[s.id])

    assert rolled_up(store.session(session.id)) == 41 + 330 + 1100
    total = tree_usage(store, store.session(session.id))
    assert total.input_tokens + total.output_tokens == 1471
    nodes = [(n.session.spec.name, n.depth, n.session.spec.depth) for n in walk(store, store.session(session.id))]
    assert nodes == [("main", 0, 0), ("planner", 1, 1), ("researcher", 2, 2)]
    grandchild = by_parent[by_parent[session.id][0].id][0]
    assert grandchild.parent_tool_call_id == tool_output(store, by_parent[session.id][0].id, "delegate").id
    assert "delegate" not in grandchild.spec.tools and "task_complete" in grandchild.spec.tools


def test_a_task_complete_recorded_before_a_crash_ends_the_turn_on_resume_without_a_model_call(db_url, workspace, tmp_path):
    parent = AgentRegistry(agents=(RESEARCHER,)).main_spec("scripted:none", "scripted", str(workspace))
    child = child_spec(parent, RESEARCHER)
    # the researcher has no responses left: a second model call would fail the turn
    store, loop, session, _ = setup(db_url, workspace, tmp_path, {"researcher": []}, spec=child)
    now = SYSTEM_CLOCK.now()
    session = store.session(session.id)
    input_id = session.next_input["input_id"]
    tid = turn_id(session.id, input_id)
    session.start_turn(tid, now)
    turn = Turn(id=tid, session_id=session.id, input_id=input_id, number=1, input_text="go", agent="researcher", timestamp=now)
    turn.start(now)
    block = ToolUseBlock(id="c1", name="task_complete", input={"status": "completed", "summary": "found it"})
    step = turn.record_response(ModelResponse(content=[block], stop_reason="tool_use", usage=Usage(input_tokens=1)), now)
    call = ToolCall(id=tool_call_id(tid, step, "c1"), session_id=session.id, turn_id=tid, step=step, tool_use_id="c1",
                    name="task_complete", input=block.input, flags={}, timestamp=now)
    call.start(now)
    call.complete("reported", now, ends_turn=True)
    turn.record_tool_results([call.result_block()], now)
    store.save(session, turn, call)  # ...and the process died here, before the turn was finished

    outcome = asyncio.run(loop.run_next(session.id))
    assert outcome.status == "completed"
    assert store.turn(tid).model_calls == 1


def test_cancelling_the_parent_cancels_its_running_children(db_url, workspace, tmp_path):
    store, loop, session, events = setup(db_url, workspace, tmp_path, {
        "main": [response(tool_use("d1", "delegate", tasks=[{"agent": "researcher", "task": "slow"}])), response(text("never"))],
        "researcher": [response(text("too late"), delay_s=30)],
    })

    async def scenario():
        task = asyncio.ensure_future(loop.run_next(session.id))
        while not any(e.type == "message_start" and e.session_id != str(session.id) for e in events):
            await asyncio.sleep(0.01)
        task.cancel()
        return await task

    outcome = asyncio.run(scenario())
    assert outcome.status == "cancelled"
    child_id = next(s for s in store.session_ids() if s != session.id)
    child = store.session(child_id)
    assert store.turn(child.turns[0]).status == "cancelled" and child.status == "idle"
    end = next(e for e in events if e.type == "agent_end" and e.session_id == str(child_id))
    assert end.status == "failed" and "cancelled" in end.reason


def test_a_child_paused_for_approval_gives_the_parent_a_failed_result_it_can_act_on(db_url, workspace, tmp_path):
    shell = AgentSpec(name="operator", description="runs commands", tools=("bash",))
    store, loop, session, _ = setup(db_url, workspace, tmp_path, {
        "main": [response(tool_use("d1", "delegate", tasks=[{"agent": "operator", "task": "run ls"}])), response(text("ok"))],
        "operator": [response(tool_use("b1", "bash", command="ls")), response(text("listed"))],
    }, agents=(shell,))
    assert asyncio.run(loop.run_next(session.id)).status == "completed"
    result = json.loads(tool_output(store, session.id, "delegate").output)["results"][0]
    assert result["agent"] == "operator" and result["status"] == "failed"
    assert "waiting for a tool approval" in result["summary"]
    assert store.turn(store.session(UUID(result["session_id"])).turns[0]).status == "awaiting_approval"
