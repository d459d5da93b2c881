"""The orchestration tools: delegate, list_agents, list_tasks (for agents that may delegate), task_complete (children).

They act on the runtime itself, so they reach the running loop's I/O bundle through ToolContext.io
and read the calling session's recorded spec (never a registry file) to know who may be asked.
"""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from chronicle.domain.ids import tool_call_id
from chronicle.domain.instance_names import instance_name
from chronicle.domain.task_board import DelegatedTask as BoardTask
from chronicle.domain.task_board import TaskClaimRefused
from chronicle.runtime.task_board import tasks_of, with_prior_reflections
from chronicle.runtime.tools.base import Tool, ToolContext, ToolError, ToolOutput
from chronicle.runtime.tools.editions import LIST_TASKS_EDITION

from .children import ChildResult, open_child, refused_result, run_child, task_text
from .registry import child_spec, targets
from .slots import waiting_for_children


class DelegatedTask(BaseModel):
    agent: str = Field(description="Name of the agent to ask (see list_agents)")
    task: str = Field(min_length=1, description="What the agent should do")
    context: str = Field("", description="What it needs to know that it cannot find itself")
    task_id: str | None = Field(
        None, description="Optional: the id of a task already on your session's task board (list_tasks shows them); the "
                          "agent claims it and its outcome settles it. Leave it out to open a new task for this request",
    )

#: What edition 3 added to delegate's description and task_id (runtime/tools/editions.py).
_LIST_TASKS_HINT = " (list_tasks shows them)"


class Delegate(Tool):
    """Run sub-agents concurrently, each in its own child session, and return all their results at once.

    Marked idempotent although it starts work: each child's session id is derived from this tool
    call's id and the task's index, so running the call again (a parent resumed after a crash)
    finds the children already started and continues them instead of spawning duplicates, and a
    finished child just reports its recorded result again; a child that claimed a board task
    (`task_id`) was created with its claim, so it is found with it and the task is not claimed
    again. Unbounded: each child has its own
    iteration limit, so the per-tool timeout would only cut children off half-way.
    """

    name = "delegate"
    description = (
        "Delegate one or more tasks to other agents (see list_agents). All tasks run concurrently, each agent "
        "in its own session with its own tools; you get one result listing every agent's status and summary. "
        "A task may name the task_id of a task on your task board (list_tasks shows them): the agent claims it (a task "
        "that cannot be claimed fails at once with the reason, the others still run)."
    )
    idempotent = True
    unbounded = True

    class Input(BaseModel):
        tasks: list[DelegatedTask] = Field(min_length=1, max_length=16)

    @classmethod
    def schema_for(cls, edition: int) -> dict[str, Any]:
        """Edition 1 (runtime/tools/editions.py) had no task_id, and its description did not mention it; a
        task_id the model sends anyway is still taken. Edition 2 had task_id, but no list_tasks to point to."""
        schema = cls.schema()
        item = schema["input_schema"]["$defs"]["DelegatedTask"]["properties"]
        if edition < LIST_TASKS_EDITION:
            schema["description"] = schema["description"].replace(_LIST_TASKS_HINT, "")
            item["task_id"]["description"] = item["task_id"]["description"].replace(_LIST_TASKS_HINT, "")
        if edition < 2:
            schema["description"] = cls.description[: cls.description.index(" A task may name")]
            del item["task_id"]
        return schema

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        loop = ctx.io
        if loop is None or loop.spawn is None:
            raise ToolError("delegate needs the running agent loop")
        parent = loop.store.session(UUID(ctx.session_id))
        spec = parent.spec
        if not spec.may_delegate:
            raise ToolError(
                f"delegation refused: agent {spec.name!r} is at depth {spec.depth}, the limit is {spec.max_depth}; do the work yourself"
            )
        known = {a.name.casefold(): a for a in targets(spec)}
        asked = asked_before(loop.store, parent, UUID(ctx.tool_call_id))
        specs = []
        for task in args.tasks:
            if task.agent.casefold() == spec.name.casefold():
                raise ToolError(f"delegation refused: {spec.name!r} cannot delegate to itself; pick another agent or do it yourself")
            definition = known.get(task.agent.casefold())
            if definition is None:
                names = ", ".join(sorted(a.name for a in known.values())) or "none"
                raise ToolError(f"delegation refused: no agent named {task.agent!r}; available: {names}")
            asked[definition.name.casefold()] += 1
            specs.append(child_spec(spec, definition, instance_name(definition.name, task.task, asked[definition.name.casefold()])))
        call_id = UUID(ctx.tool_call_id)
        runs: list[Any] = []
        for index, (task, child) in enumerate(zip(args.tasks, specs, strict=True)):
            board = (task.task_id or "").strip() or None
            try:
                opened = open_child(loop, parent, call_id, index, child,
                                    with_prior_reflections(loop.store, task.task, task_text(task.task, task.context)), task.task,
                                    board_task=board)
            except TaskClaimRefused as exc:  # this item fails now, with no child; the others still run
                runs.append(_ready(refused_result(child.name, board or "", str(exc))))
                continue
            # a child exists only with its claim (one transaction), so board is a valid id here
            runs.append(run_child(loop, opened, UUID(board) if board else None))
        async with waiting_for_children():  # a sub-agent that delegates frees its slot meanwhile (see slots.py)
            results: list[ChildResult] = await asyncio.gather(*runs)
        return ToolOutput(json.dumps({"results": [r.row() for r in results]}, ensure_ascii=False),
                          effects=[mark for r in results for mark in r.marks])


def asked_before(store: Any, parent: Any, call_id: UUID) -> Counter[str]:
    """How many children of each agent (casefolded) the parent's delegate calls asked for before this call, read
    from its turns' recorded responses: the n of a new child's instance name. Read from the record, so a resumed
    parent names a child it has yet to start as the crashed process would have; undone turns count too, as their
    children exist. One batched read of the parent's turns, at each delegate call only."""
    asked: Counter[str] = Counter()
    for turn in store.turns(parent.turns):
        for step in turn.steps:
            for block in step["response"].get("content", []):
                if block.get("type") != "tool_use" or block.get("name") != Delegate.name:
                    continue
                if tool_call_id(turn.id, step["step"], block["id"]) == call_id:
                    return asked
                given = block.get("input")
                items = given.get("tasks") if isinstance(given, dict) else None  # malformed input ran no child
                for item in items if isinstance(items, list) else []:
                    if isinstance(item, dict) and isinstance(item.get("agent"), str):
                        asked[item["agent"].casefold()] += 1
    return asked


async def _ready(result: ChildResult) -> ChildResult:
    return result


class ListAgents(Tool):
    name = "list_agents"
    description = "List the agents you may delegate to with `delegate`: name, what they do, their tools."
    read_only = idempotent = parallel_safe = True

    class Input(BaseModel):
        pass

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        spec = ctx.io.store.session(UUID(ctx.session_id)).spec
        if not spec.may_delegate:
            return ToolOutput(f"none: agent {spec.name!r} is at its delegation depth limit ({spec.max_depth})")
        lines = [
            f"- {a.name}: {a.description or '(no description)'} [tools: {', '.join(a.tools) or 'none'}]"
            for a in targets(spec)
        ]
        return ToolOutput("\n".join(lines) if lines else "none: no other agents are defined")


class ListTasks(Tool):
    """Seed 004's board made visible to the model: `delegate` claims a task by its task_id, and a task posted
    with `chronicle tasks add` is otherwise known only to whoever posted it. Read-only, but its result is
    the board as it stood (other sessions and commands change it), so replay answers it from the record."""

    name = "list_tasks"
    description = (
        "List the tasks on your session's task board: task_id, status (pending, in_progress, completed, failed), "
        "agent (null: any agent may take it), the task, the sub-agent session working on it, and the summary of a "
        "settled one. A pending task with posted true is waiting for you: name its task_id in a delegate task item "
        "to have that agent claim it."
    )
    read_only = idempotent = parallel_safe = True
    since_edition = LIST_TASKS_EDITION
    reads_store = True

    class Input(BaseModel):
        status: Literal["pending", "in_progress", "completed", "failed"] | None = Field(
            None, description="Only the tasks in this status (pending: not claimed yet); leave it out for all")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        loop = ctx.io
        if loop is None:
            raise ToolError("list_tasks needs the running agent loop")
        session = loop.store.session(UUID(ctx.session_id))
        rows = [_board_row(task) for task in tasks_of(loop.store, session) if args.status in (None, task.status)]
        return ToolOutput(json.dumps({"tasks": rows}, ensure_ascii=False))


def _board_row(task: BoardTask) -> dict[str, Any]:
    """What the model needs to pick and claim a task (`chronicle tasks --json` has the rest)."""
    row: dict[str, Any] = {"task_id": str(task.id), "status": task.status, "agent": task.agent or None, "task": task.task,
           "posted": task.posted, "child_session_id": str(task.child_session_id) if task.child_session_id else None}
    if task.finished:
        row["summary"] = task.summary
    return row


class TaskComplete(Tool):
    """Ends the sub-agent's turn with a structured report; recorded with `ends_turn` so that a
    resumed process also ends the turn there instead of asking the model again."""

    name = "task_complete"
    description = (
        "Finish your delegated task and report back to the agent that asked. Call it once, last: your turn ends "
        "with it. status is 'completed' or 'failed'; summary says what you found or did, or why it failed."
    )
    read_only = idempotent = True
    may_end_turn = True

    class Input(BaseModel):
        status: Literal["completed", "failed"]
        summary: str = Field(min_length=1)
        files_modified: list[str] = Field(default_factory=list)
        tests_run: list[str] = Field(default_factory=list, description="Tests or checks you ran, and how they ended")
        caveats: str | None = None

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        first = _reported_before(ctx)
        if first is not None:  # seed 004: a second report in one answer is ignored; the first one stands
            return ToolOutput(f"ignored: task_complete was already called in this answer ({first}); that report stands "
                              "and your turn ends with it")
        return ToolOutput(f"reported {args.status} to the parent agent; your turn ends here", ends_turn=True)


#: A call in one of these ended without reporting (bad arguments, a denial, a cancel): a later call's report counts.
_NO_REPORT = ("failed", "denied", "cancelled", "skipped", "interrupted")


def _reported_before(ctx: ToolContext) -> str | None:
    """What an earlier task_complete of this call's answer reports, if one does: the parent gets the first report
    (agents/children.py), so this call's result must not say it reported anything. By the answer's order, not by
    which ended first: read-only calls of one step run together."""
    if ctx.io is None or not ctx.tool_call_id:
        return None
    store = ctx.io.store
    me = store.tool_call(UUID(ctx.tool_call_id))
    for call in store.tool_calls_of(store.turn(me.turn_id)):
        if call.id == me.id:
            return None
        if call.step == me.step and call.name == TaskComplete.name and call.status not in _NO_REPORT:
            return f"it reported {call.input.get('status')}"
    return None


ORCHESTRATION_TOOLS: dict[str, type[Tool]] = {cls.name: cls for cls in (Delegate, ListAgents, ListTasks, TaskComplete)}
