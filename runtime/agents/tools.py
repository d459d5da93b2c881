"""The orchestration tools: delegate, list_agents (for agents that may delegate), task_complete (children).

They act on the runtime itself, so they reach the running loop's I/O bundle through ToolContext.io
and read the calling session's recorded spec (never a registry file) to know who may be asked.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Literal
from uuid import UUID

from pydantic import BaseModel, Field

from chronicle.domain.task_board import TaskClaimRefused
from chronicle.runtime.task_board import with_prior_reflections
from chronicle.runtime.tools.base import Tool, ToolContext, ToolError, ToolOutput

from .children import ChildResult, open_child, refused_result, run_child, task_text
from .registry import child_spec, targets
from .slots import waiting_for_children


class DelegatedTask(BaseModel):
    agent: str = Field(description="Name of the agent to ask (see list_agents)")
    task: str = Field(min_length=1, description="What the agent should do")
    context: str = Field("", description="What it needs to know that it cannot find itself")
    task_id: str | None = Field(
        None, description="Optional: the id of a task already on your session's task board; the agent claims it and "
                          "its outcome settles it. Leave it out to open a new task for this request",
    )


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
        "A task may name the task_id of a task on your task board: the agent claims it (a task that cannot be "
        "claimed fails at once with the reason, the others still run)."
    )
    idempotent = True
    unbounded = True

    class Input(BaseModel):
        tasks: list[DelegatedTask] = Field(min_length=1, max_length=16)

    @classmethod
    def schema_for(cls, edition: int) -> dict[str, Any]:
        """Edition 1 (runtime/tools/editions.py) had no task_id, and its description did not mention it; a
        task_id the model sends anyway is still taken."""
        schema = cls.schema()
        if edition < 2:
            schema["description"] = cls.description[: cls.description.index(" A task may name")]
            del schema["input_schema"]["$defs"]["DelegatedTask"]["properties"]["task_id"]
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
        specs = []
        for task in args.tasks:
            if task.agent.casefold() == spec.name.casefold():
                raise ToolError(f"delegation refused: {spec.name!r} cannot delegate to itself; pick another agent or do it yourself")
            definition = known.get(task.agent.casefold())
            if definition is None:
                names = ", ".join(sorted(a.name for a in known.values())) or "none"
                raise ToolError(f"delegation refused: no agent named {task.agent!r}; available: {names}")
            specs.append(child_spec(spec, definition))
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
        return ToolOutput(f"reported {args.status} to the parent agent; your turn ends here", ends_turn=True)


ORCHESTRATION_TOOLS: dict[str, type[Tool]] = {cls.name: cls for cls in (Delegate, ListAgents, TaskComplete)}
