"""A sub-agent's loop, made from its parent's: the agent layer's half of loop assembly.

Top-level loops are composed by the application layer (runtime/app/loops.py: provider,
settings, guards, title, tracing). A child gets its parent's provider, broker, approver and
hooks (so the parent's guards watch it too) and its own toolbox.
"""

from __future__ import annotations

from pathlib import Path

from chronicle.domain.agent_spec import AgentSpec

from .loop import AgentLoop, LoopOptions
from .tools import toolbox_for
from .tools.base import Toolbox


def child_loop(parent: AgentLoop, spec: AgentSpec) -> AgentLoop:
    """A sub-agent's loop: the parent's store, provider, workspace, broker, clock, approver, hooks
    (guards included) and compactor; its own toolbox and max_iterations from its spec."""
    options = parent.options
    return AgentLoop(
        parent.store, parent.provider, agent_toolbox(spec, parent.workspace), parent.workspace,
        broker=parent.broker, clock=parent.clock, approver=parent.approver, hooks=parent.hooks, compactor=parent.compactor,
        options=LoopOptions(
            max_iterations=None, auto_approve=options.auto_approve, tool_timeout_s=options.tool_timeout_s,
            max_tokens=options.max_tokens, retry=options.retry,
        ),
    )


def agent_toolbox(spec: AgentSpec, workspace: Path | None = None) -> Toolbox:
    """The spec's tools by name, and the MCP tools recorded on it (runtime/tools/mcp_tools.py)."""
    box = toolbox_for(spec.tools, workspace)
    if not spec.mcp_tools:
        return box
    from .tools.mcp_tools import mcp_tools

    return Toolbox([*box.tools.values(), *mcp_tools(spec.mcp_tools)])
