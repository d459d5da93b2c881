"""Chronicle as a library: your agents, your tools, every decision recorded, undoable and replayable.

    from chronicle import Chronicle, Agent, tool, ToolError

The command line is one client of this API; both hand over to the same runtime functions.
"""

from __future__ import annotations

from chronicle.runtime.live import (
    LIVE_EVENTS,
    AgentEnd,
    AgentStart,
    ApprovalNeeded,
    CompactionEvent,
    ErrorEvent,
    LiveEvent,
    MessageEnd,
    MessageStart,
    MessageUpdate,
    ProgressEvent,
    StatusChange,
    ToolEnd,
    ToolStart,
    ToolUpdate,
    TurnEnd,
    TurnStart,
    UsageEvent,
)
from chronicle.runtime.tools.base import Tool, ToolError, ToolOutput
from chronicle.runtime.tools.functions import ToolContext, tool

from .agent import Agent
from .client import Chronicle, RunResult
from .errors import ChronicleError

__all__ = [
    "LIVE_EVENTS",
    "Agent",
    "AgentEnd",
    "AgentStart",
    "ApprovalNeeded",
    "Chronicle",
    "ChronicleError",
    "CompactionEvent",
    "ErrorEvent",
    "LiveEvent",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "ProgressEvent",
    "RunResult",
    "StatusChange",
    "Tool",
    "ToolContext",
    "ToolEnd",
    "ToolError",
    "ToolOutput",
    "ToolStart",
    "ToolUpdate",
    "TurnEnd",
    "TurnStart",
    "UsageEvent",
    "tool",
]
