"""`spawn_batch`: a tool runs several tool-exec subtasks at once and gets their results in input order.

Seed 001's scheduler runs lightweight `ToolExec` subtasks concurrently and hands back the results
in the order they were asked for, whatever order they finish in. Here a tool (a `@tool` function
through its `ToolContext`, or a Tool class through its runtime context) names tools of the
session's toolbox with their inputs; each runs with its own timeout, and a failure — unknown tool,
bad arguments, an error, a timeout — is that slot's error result, never an exception that loses
the others. Only tools that are safe to run again may be subtasks (read-only or idempotent, no
approval, not `delegate`): subtasks are not committed one by one, so a crash re-runs the calling
tool and its batch. What ran is recorded: one entry per subtask among the calling tool call's
`effects` (`subtask` index, `tool`, `input`, `is_error`, `duration_ms`, and the SHA-256 and length
of its output), so `audit` shows the batch; its outputs reach the log through the calling tool's
own result. A calling tool that fails keeps the record too (ToolCall.EffectsRecorded, runtime/tool_runner.py).
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from time import monotonic
from typing import Any

from .tools.base import ToolContext, ToolError, ToolOutput, safe_output
from .tools.threads import abandoned, left_running_note

EFFECTS_KEY = "subtasks"


def refusal(tool: Any, name: str) -> str | None:
    if tool is None:
        return f"unknown tool: {name}"
    if tool.requires_approval or tool.unbounded:
        return f"{name} cannot run as a subtask: it needs approval or runs unbounded"
    if not (tool.read_only or tool.idempotent):
        return f"{name} cannot run as a subtask: only read-only or idempotent tools may (a crash runs the batch again)"
    return None


async def _one(ctx: ToolContext, index: int, name: str, raw: dict[str, Any], place: int) -> tuple[ToolOutput, dict[str, Any]]:
    toolbox = getattr(ctx.io, "toolbox", None)
    tool = toolbox.get(name) if toolbox is not None else None
    started = monotonic()
    refused = refusal(tool, name)
    if refused is not None:
        output = ToolOutput(refused, is_error=True)
    else:
        assert tool is not None
        limit = tool.timeout_s or ctx.timeout_s
        child = ToolContext(workspace=ctx.workspace, timeout_s=ctx.timeout_s, session_id=ctx.session_id, tool_call_id=ctx.tool_call_id,
                            io=ctx.io, store_url=ctx.store_url, subtask=place, event_loop=ctx.event_loop)
        try:
            output = await asyncio.wait_for(tool.run(tool.parse(raw), child), timeout=limit)
        except ToolError as exc:
            output = ToolOutput(str(exc), is_error=True)
        except asyncio.TimeoutError:
            left = f"; {left_running_note(name)}" if abandoned(child) else ""  # a sync function runs on (tools/threads.py)
            output = ToolOutput(f"{name} timed out after {limit:g} s{left}", is_error=True)
        except Exception as exc:  # noqa: BLE001 - a subtask's bug is its slot's error result
            output = ToolOutput(f"{name} raised {type(exc).__name__}: {exc}", is_error=True)
    content = safe_output(output.content)
    output = ToolOutput(content, is_error=output.is_error, blocks=output.blocks)
    mark = {"subtask": index, "tool": name, "input": raw, "is_error": output.is_error,
            "duration_ms": round((monotonic() - started) * 1000, 3),
            "output_sha256": hashlib.sha256(content.encode("utf-8")).hexdigest(), "output_chars": len(content)}
    return output, mark


async def spawn_batch(ctx: ToolContext, tasks: Sequence[tuple[str, dict[str, Any]]]) -> list[ToolOutput]:
    """Run every (tool name, input) concurrently; their outputs in the order asked, each recorded on the calling call.

    The marks are kept however the batch ends: a calling tool that times out or is interrupted mid-batch
    still records the subtasks that finished, and one `unfinished` mark for each that did not."""
    items = [(name, dict(raw)) for name, raw in tasks]
    marks: dict[int, dict[str, Any]] = {}
    before = len(ctx.extras.get(EFFECTS_KEY, ()))  # a tool may run several batches: their marks follow one another

    async def one(index: int, name: str, raw: dict[str, Any]) -> ToolOutput:
        output, marks[index] = await _one(ctx, index, name, raw, before + index)
        return output

    try:
        return list(await asyncio.gather(*(one(i, name, raw) for i, (name, raw) in enumerate(items))))
    finally:
        for i, (name, raw) in enumerate(items):
            marks.setdefault(i, {"subtask": i, "tool": name, "input": raw, "is_error": True, "unfinished": True})
        ctx.extras.setdefault(EFFECTS_KEY, []).extend(marks[i] for i in sorted(marks))
