"""Seed 004's TaskBoard.ClaimTask on the real stores: a task added to a session's board ahead of
delegation, claimed by the child a `delegate` task item names it for, settled from that child's
outcome as an auto-opened task is; each claim refusal failing only its own item with no child; and a
resumed parent finding its claim instead of claiming again."""

from __future__ import annotations

import asyncio
import json
from uuid import UUID, uuid4

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.ids import child_session_id
from chronicle.runtime.agents.children import find_session, open_child
from chronicle.runtime.agents.registry import AgentRegistry, child_spec
from chronicle.runtime.app import queries
from chronicle.runtime.app import tasks as board
from chronicle.runtime.app.errors import AppError
from chronicle.runtime.live import Broker
from chronicle.runtime.loop import AgentLoop
from chronicle.runtime.providers import ScriptedProvider
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore, UnknownSession
from chronicle.runtime.task_board import find_task, get_task
from chronicle.runtime.tools import READ_ONLY_TOOLS
from chronicle.runtime.toolsets import toolbox_for
from tests.helpers import response, text, tool_use

AGENTS = (
    AgentSpec(name="researcher", description="reads files", tools=READ_ONLY_TOOLS),
    AgentSpec(name="auditor", description="checks", tools=READ_ONLY_TOOLS),
    AgentSpec(name="breaker", description="gives up", tools=READ_ONLY_TOOLS, max_iterations=1),
    AgentSpec(name="crasher", description="its model fails", tools=READ_ONLY_TOOLS),
)


class Board:
    """A main session that may delegate to AGENTS, its store, and a loop built once the script is known
    (the script names task ids, which exist only once the tasks are on the board)."""

    def __init__(self, db_url: str, workspace, tmp_path) -> None:
        self.store = ChronicleStore(db_url)
        self.workspace, self.tmp_path = workspace, tmp_path
        self.registry = AgentRegistry(main=AgentSpec(name="main", tools=READ_ONLY_TOOLS, max_depth=1), agents=AGENTS)
        self.spec = self.registry.main_spec(f"scripted:{tmp_path / 'script.json'}", "scripted", str(workspace))
        self.session, _ = start_session(self.store, self.spec, "go")

    def run(self, script: dict):
        path = self.tmp_path / "script.json"
        path.write_text(json.dumps({"agents": script}), encoding="utf-8")
        self.loop = AgentLoop(self.store, ScriptedProvider(path), toolbox_for(self.spec.tools), self.workspace, broker=Broker())
        return asyncio.run(self.loop.run_next(self.session.id))

    def delegate_calls(self):
        session = self.store.session(self.session.id)
        return [c for t in session.turns for c in self.store.tool_calls_of(self.store.turn(t)) if c.name == "delegate"]

    def results(self, index: int = 0) -> list[dict]:
        return json.loads(self.delegate_calls()[index].output)["results"]

    def rows(self) -> dict[str, dict]:
        return {r["task_id"]: r for r in board.listing(self.store, self.session.id)}


def item(agent: str, task: str, task_id: str | None = None) -> dict:
    return {"agent": agent, "task": task, **({"task_id": task_id} if task_id is not None else {})}


def delegate(id_: str, *items: dict) -> dict:
    return tool_use(id_, "delegate", tasks=list(items))


def complete(id_: str, summary: str, status: str = "completed") -> dict:
    return tool_use(id_, "task_complete", status=status, summary=summary)


@pytest.fixture
def main(db_url, workspace, tmp_path) -> Board:
    return Board(db_url, workspace, tmp_path)


def test_a_task_added_to_the_board_is_pending_with_no_child_until_a_delegate_item_claims_it_and_its_report_settles_it(main):
    added = board.add(main.store, str(main.session.id)[:8], "  count the widgets  ", agent="Researcher")
    tid = added["task_id"]
    assert added == {"task_id": tid, "agent": "researcher", "status": "pending", "summary": "", "child_session_id": None,
                     "task": "count the widgets", "index": None, "parent_tool_call_id": None, "reflection": None, "posted": True,
                     "instance": None}
    assert board.listing(main.store, main.session.id) == [added]

    assert main.run({
        "main": [response(delegate("d1", item("researcher", "count the widgets", tid), item("auditor", "check the count"))),
                 response(text("ok"))],
        "researcher": [response(complete("r1", "42 widgets"))],
        "auditor": [response(complete("a1", "the count holds"))],
    }).status == "completed"

    call = main.delegate_calls()[0]
    claimed_child = child_session_id(call.id, 0)
    results = main.results()
    assert results[0] == {**results[0], "agent": "researcher", "status": "completed", "summary": "42 widgets", "task_id": tid,
                          "session_id": str(claimed_child)}
    assert "task_id" not in results[1], "an item without task_id reports as before"
    assert find_task(main.store, claimed_child) is None, "a child that claimed a board task opens no task of its own"

    rows = main.rows()
    assert rows[tid] == {**added, "status": "completed", "summary": "42 widgets", "child_session_id": str(claimed_child),
                         "index": 0, "parent_tool_call_id": str(call.id), "instance": "researcher-count-widgets-1"}
    assert list(rows)[0] == tid, "the board lists its added tasks first"
    auto = [r for r in rows.values() if not r["posted"]]
    assert [(r["agent"], r["status"], r["child_session_id"]) for r in auto] == [
        ("auditor", "completed", str(child_session_id(call.id, 1)))]
    assert get_task(main.store, UUID(tid)).claimed_by == "researcher"

    audit = [r for r in queries.audit(main.store, session=main.session.id) if r["kind"] == "task" and r["detail"]["task_id"] == tid]
    assert [(r["name"], r["status"]) for r in audit] == [("researcher", "pending"), ("researcher", "in_progress"),
                                                         ("researcher", "completed")]
    assert audit[0]["detail"]["posted"] is True and "child_session_id" not in audit[0]["links"]
    assert audit[1]["detail"]["claimed_by"] == "researcher"
    assert audit[1]["links"]["child_session_id"] == audit[2]["links"]["child_session_id"] == str(claimed_child)


def test_each_claim_refusal_fails_only_its_own_item_with_the_reason_and_starts_no_child(main, db_url, workspace, tmp_path):
    (tmp_path / "other").mkdir()
    other = Board(db_url, workspace, tmp_path / "other")
    elsewhere = board.add(other.store, other.session.id, "someone else's work")["task_id"]
    for_auditor = board.add(main.store, main.session.id, "audit the ledger", agent="auditor")["task_id"]
    once = board.add(main.store, main.session.id, "read hello.txt")["task_id"]
    doomed = board.add(main.store, main.session.id, "break things")["task_id"]
    unknown = str(uuid4())

    main.run({
        "main": [
            response(delegate(
                "d1",
                item("researcher", "a", "not-a-task-id"),
                item("researcher", "b", unknown),
                item("researcher", "c", elsewhere),
                item("researcher", "d", for_auditor),
                item("researcher", "e", once),
                item("auditor", "f", once),
                item("auditor", "g", for_auditor),
                item("breaker", "h", doomed),
            )),
            response(delegate("d2", item("researcher", "again", once), item("researcher", "retry", doomed))),
            response(text("ok")),
        ],
        "researcher": [response(complete("r1", "read it"))],
        "auditor": [response(complete("a1", "audited"))],
        "breaker": [response(tool_use("b1", "list_dir", path="."))],
    })

    first, second = main.results(0), main.results(1)
    reasons = {
        0: "'not-a-task-id' is not a task id",
        1: f"no task {unknown} on any board",
        2: f"task {elsewhere} is on another session's board",
        3: f"task {for_auditor} is for agent 'auditor', not 'researcher'",
        5: f"task {once} is already in_progress (claimed by 'researcher'",
    }
    calls = main.delegate_calls()
    for index, reason in reasons.items():
        result = first[index]
        assert result["status"] == "failed" and result["session_id"] is None, index
        assert result["summary"].startswith("not started: task_id ") and reason in result["summary"], result["summary"]
        assert find_session(main.store, child_session_id(calls[0].id, index)) is None, f"item {index} started a child"
    assert [first[i]["status"] for i in (4, 6, 7)] == ["completed", "completed", "failed"], "the other items still ran"
    assert [r["status"] for r in second] == ["failed", "failed"]
    assert f"task {once} is already completed" in second[0]["summary"]
    assert f"task {doomed} is already failed" in second[1]["summary"]
    assert all(find_session(main.store, child_session_id(calls[1].id, i)) is None for i in (0, 1))

    # the refused claims changed nothing on the board; the stored delegate result holds each reason
    assert board.listing(other.store, other.session.id)[0]["status"] == "pending"
    rows = main.rows()
    assert (rows[for_auditor]["agent"], rows[for_auditor]["child_session_id"]) == ("auditor", str(child_session_id(calls[0].id, 6)))
    assert rows[once]["child_session_id"] == str(child_session_id(calls[0].id, 4))
    assert rows[doomed]["status"] == "failed" and rows[doomed]["reflection"]["task"] == "break things"
    assert "is for agent 'auditor'" in calls[0].output


def test_a_claimed_board_task_is_settled_as_an_auto_opened_one_on_every_path(main):
    ids = {name: board.add(main.store, main.session.id, f"the {name}'s task")["task_id"]
           for name in ("researcher", "breaker", "auditor", "crasher")}
    main.run({
        "main": [response(delegate("d1", *(item(name, f"the {name}'s task", tid) for name, tid in ids.items()))),
                 response(text("ok"))],
        "researcher": [response(complete("r1", "the file is missing", status="failed"))],
        "breaker": [response(tool_use("b1", "list_dir", path="."))],
        "auditor": [response(text("all good, no report"))],
        "crasher": [response(stop="error", error={"kind": "overloaded", "message": "the model is down", "retryable": False})],
    })
    rows = main.rows()
    status = {name: (rows[tid]["status"], rows[tid]["summary"]) for name, tid in ids.items()}
    assert status["researcher"] == ("failed", "the file is missing"), "task_complete's own status"
    assert status["breaker"][0] == "failed" and "max_iterations reached" in status["breaker"][1]
    assert status["auditor"] == ("completed", "all good, no report"), "a natural finish without task_complete completes it"
    assert status["crasher"][0] == "failed" and "the model is down" in status["crasher"][1], "an error never leaves it in_progress"
    for name in ("researcher", "breaker", "crasher"):
        reflection = rows[ids[name]]["reflection"]
        assert reflection is not None and reflection["task"] == f"the {name}'s task" and reflection["agent"] == name


def test_a_resumed_parent_finds_its_child_and_its_claim_and_never_claims_again(main):
    tid = board.add(main.store, main.session.id, "count the widgets", agent="researcher")["task_id"]
    main.run({
        "main": [response(delegate("d1", item("researcher", "count the widgets", tid))), response(text("ok"))],
        "researcher": [response(complete("r1", "42"))],
    })
    before = len(list(main.store.events.get(UUID(tid))))
    call = main.delegate_calls()[0]
    parent = main.store.session(main.session.id)
    # what a parent resumed after a crash does: its delegate call runs again with the same input
    again = open_child(main.loop, parent, call.id, 0, child_spec(parent.spec, AGENTS[0]), "count the widgets", board_task=tid)
    assert again.id == child_session_id(call.id, 0)
    assert len(list(main.store.events.get(UUID(tid)))) == before, "nothing recorded on the task a second time"
    assert main.rows()[tid]["status"] == "completed"


def test_adding_a_task_refuses_an_empty_text_an_unknown_agent_and_an_unknown_session_and_records_nothing(main):
    with pytest.raises(AppError) as empty:
        board.add(main.store, main.session.id, "   ")
    with pytest.raises(AppError) as stranger:
        board.add(main.store, main.session.id, "x", agent="ghost")
    assert (empty.value.code, stranger.value.code) == (2, 2)
    assert "ghost" in str(stranger.value) and "auditor, breaker, crasher, researcher" in str(stranger.value)
    with pytest.raises(UnknownSession):
        board.add(main.store, "ffffffff", "x")
    assert board.listing(main.store, main.session.id) == []


def test_the_model_sees_task_id_as_an_optional_field_of_each_delegate_task():
    from chronicle.runtime.agents.tools import Delegate

    schema = Delegate.schema()
    item_schema = next(iter(schema["input_schema"]["$defs"].values()))
    assert "task_id" in item_schema["properties"] and "task_id" not in item_schema.get("required", [])
    assert "task board" in item_schema["properties"]["task_id"]["description"] and "task_id" in schema["description"]
