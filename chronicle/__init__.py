"""Chronicle as a library: your agents, your tools, every decision recorded, undoable and replayable.

    from chronicle import Chronicle, Agent, tool, ToolError

The command line is one client of this API; both hand over to the same runtime functions.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any


def _from_the_checkout() -> None:
    """In the source tree, `chronicle.domain`, `.projections` and `.runtime` are found beside this folder.

    Installed, they are inside it (pyproject.toml's package-dir maps the top-level folders there). A program run in
    the repository's root imports this folder as `chronicle`, ahead of any installed copy, and then found no
    `chronicle.domain` ("No module named 'chronicle.domain'") unless the install was editable. So here, and only
    here, the checkout's root is searched for them too: the whole package is then the checkout's, as one shadowed
    package is. An editable install finds the same folders this way, and an installed package is left alone."""
    import os

    here = os.path.dirname(__file__)
    root = os.path.dirname(here)
    if os.path.isdir(os.path.join(here, "domain")):
        return
    if all(os.path.isfile(os.path.join(root, part, "__init__.py")) for part in ("domain", "projections", "runtime")):
        __path__.append(root)


_from_the_checkout()

# Every name is imported on first use (PEP 562): `chronicle.runtime.cli` is a subpackage of this
# one, so importing the library eagerly here made every command, even `chronicle --version`,
# import the whole runtime (providers, SDKs) before parsing its arguments.
_SOURCES = {
    **dict.fromkeys([
        "LIVE_EVENTS", "AgentEnd", "AgentStart", "ApprovalNeeded", "CompactionEvent", "ErrorEvent", "LiveEvent", "MessageEnd", "MessageStart",
        "MessageUpdate", "ProgressEvent", "StatusChange", "ToolEnd", "ToolStart", "ToolUpdate", "TurnEnd", "TurnStart", "UsageEvent",
    ], "chronicle.runtime.live"),
    **dict.fromkeys(["Tool", "ToolError", "ToolOutput"], "chronicle.runtime.tools.base"),
    **dict.fromkeys(["ToolContext", "tool"], "chronicle.runtime.tools.functions"),
    **dict.fromkeys(["McpServer"], "chronicle.runtime.tools.mcp_config"),
    **dict.fromkeys(["Guardrail", "Rejected"], "chronicle.runtime.guardrails"),
    **dict.fromkeys(["Logger", "Middleware", "Run", "RunFailed", "Timeout"], "chronicle.runtime.middleware"),
    **dict.fromkeys(["Hook", "NeedApproval", "Skip", "Stop"], "chronicle.runtime.hooks"),
    # What a Hook's methods are given, to annotate a subclass's (docs/controls.md, *Hooks*).
    "Session": "chronicle.domain.session",
    "Turn": "chronicle.domain.turn",
    "ToolCall": "chronicle.domain.tool_call",
    "ModelRequest": "chronicle.runtime.providers.base",
    "ModelResponse": "chronicle.domain.content",
    **dict.fromkeys(["Routine"], "chronicle.routine"),
    **dict.fromkeys(["Agent"], "chronicle.agent"),
    "Chronicle": "chronicle.client",
    **dict.fromkeys(["Answered", "RunResult"], "chronicle.results"),
    **dict.fromkeys(["ChronicleError", "ChronicleWarning"], "chronicle.errors"),
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        return _version()
    source = _SOURCES.get(name)
    if source is None:
        raise AttributeError(f"module 'chronicle' has no attribute {name!r}")
    value = getattr(import_module(source), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The names above as well as those imported on first use (`dir(chronicle)`, a REPL's completion)."""
    return sorted({*globals(), *__all__, "__version__"})


def _version() -> str:
    """The installed distribution's version (`chronicle --version` prints it); read once, on first use."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        found = version("chronicle-agent")
    except PackageNotFoundError:  # a checkout on sys.path, never installed
        found = "0+unknown"
    globals()["__version__"] = found
    return found


if TYPE_CHECKING:
    __version__: str

    from chronicle.domain.content import ModelResponse
    from chronicle.domain.session import Session
    from chronicle.domain.tool_call import ToolCall
    from chronicle.domain.turn import Turn
    from chronicle.routine import Routine
    from chronicle.runtime.guardrails import Guardrail, Rejected
    from chronicle.runtime.hooks import Hook, NeedApproval, Skip, Stop
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
    from chronicle.runtime.middleware import Logger, Middleware, Run, RunFailed, Timeout
    from chronicle.runtime.providers.base import ModelRequest
    from chronicle.runtime.tools.base import Tool, ToolError, ToolOutput
    from chronicle.runtime.tools.functions import ToolContext, tool
    from chronicle.runtime.tools.mcp_config import McpServer

    from .agent import Agent
    from .client import Chronicle
    from .errors import ChronicleError, ChronicleWarning
    from .results import Answered, RunResult

__all__ = [
    "LIVE_EVENTS",
    "Agent",
    "AgentEnd",
    "Answered",
    "AgentStart",
    "ApprovalNeeded",
    "Chronicle",
    "ChronicleError",
    "ChronicleWarning",
    "CompactionEvent",
    "ErrorEvent",
    "Guardrail",
    "Hook",
    "LiveEvent",
    "Logger",
    "McpServer",
    "MessageEnd",
    "MessageStart",
    "MessageUpdate",
    "Middleware",
    "ModelRequest",
    "ModelResponse",
    "NeedApproval",
    "ProgressEvent",
    "Rejected",
    "Routine",
    "Run",
    "RunFailed",
    "RunResult",
    "Session",
    "Skip",
    "StatusChange",
    "Stop",
    "Timeout",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolEnd",
    "ToolError",
    "ToolOutput",
    "ToolStart",
    "ToolUpdate",
    "Turn",
    "TurnEnd",
    "TurnStart",
    "UsageEvent",
    "tool",
]
