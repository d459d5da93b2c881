"""The bash tool: runs in its own process group so cancel and timeout kill every child."""

from __future__ import annotations

import asyncio
import os
import signal

from pydantic import BaseModel, Field

from .base import Tool, ToolContext, ToolOutput, truncate


class Bash(Tool):
    name = "bash"
    description = "Run a shell command in the workspace directory; returns its output and exit code."
    requires_approval = True

    class Input(BaseModel):
        command: str = Field(min_length=1)
        timeout_s: float | None = Field(None, gt=0, description="Seconds before the command is killed")

    async def run(self, args: Input, ctx: ToolContext) -> ToolOutput:
        timeout = min(args.timeout_s or ctx.timeout_s, ctx.timeout_s)
        process = await asyncio.create_subprocess_shell(
            args.command,
            cwd=ctx.workspace,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            stdin=asyncio.subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            out, _ = await asyncio.wait_for(process.communicate(), timeout=timeout)
        except asyncio.TimeoutError:
            _kill_group(process)
            await process.wait()
            return ToolOutput(f"command timed out after {timeout:g} s and was killed", is_error=True)
        except asyncio.CancelledError:
            _kill_group(process)
            await process.wait()
            raise
        text = out.decode("utf-8", errors="replace")
        code = process.returncode
        body = truncate(text) if text else "(no output)"
        return ToolOutput(f"{body}\n[exit code {code}]", is_error=code != 0)


def _kill_group(process: asyncio.subprocess.Process) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
