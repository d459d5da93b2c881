"""Tools by import path (`package.module:attribute`), so any process can run a session's tools.

A session records its tools as names: built-ins by name, the user's tools by import path. The
process that defined a tool (a program using the Python API) finds it in `_DEFINED` (the running Agent's own
first, see import_paths.LiveObjects); any other
process (`chronicle resume`, a worker on another machine) imports it, with the workspace
directory importable. A path that does not load is a one-line error naming it, raised before
anything is recorded, and again when a session that needs it is resumed.

A path that loads but holds no tool (an empty list) is the same error, not an entry quietly
dropped: a session continued after its list was emptied would otherwise send its history's
tool_use/tool_result blocks with no tools defined, which the Messages API refuses (HTTP 400).
"""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

from ..import_paths import Ambiguous, Defined, NotLoadable, is_well_formed, load
from ..import_paths import make_importable as make_importable
from .base import Tool

#: Tools defined in this process, by import path: `@tool` registers each one it makes. Two are the same tool when
#: they run the same function (a @tool's) or are of the same Tool class.
_DEFINED = Defined("tool", "tool", identity=lambda t: getattr(type(t), "func", type(t)))


class ToolLoadError(ValueError):
    """A tool entry that names nothing loadable, or something that is not a tool."""


class ToolGone(ToolLoadError):
    """A path whose module imports but no longer has the attribute: the tool was deleted or renamed. A new session
    refuses it like any ToolLoadError; a continued one whose history never called what the path held goes on
    without it, said in a note, as when a list path holds fewer tools (runtime/app/vanished_tools.py).
    Code of a script run directly (`__main__`) is not gone but loads only in its own process: not this."""

    def __init__(self, message: str, path: str, why: str) -> None:
        super().__init__(message)
        #: The import path, and what is missing (`shop has no attribute 'refund'`).
        self.path, self.why = path, why


def is_import_path(entry: str) -> bool:
    return ":" in entry


def remember(tool: Tool, path: str | None = None) -> str:
    """Make `tool` loadable by its import path in this process, even if no other process can import it."""
    key = path or getattr(tool, "import_path", "") or f"{type(tool).__module__}:{type(tool).__qualname__}"
    _DEFINED.add(key, tool)
    return key


def load_tools(entry: str, workspace: Path | None = None) -> list[Tool]:
    """The tool(s) an import path names: a @tool function, a Tool class or instance, or a list of them."""
    if entry not in _DEFINED and not is_well_formed(entry):
        raise ToolLoadError(f"tool {entry!r}: write a tool path as package.module:attribute")
    try:
        target = load(entry, workspace, _DEFINED)
    except NotLoadable as failed:
        if failed.missing_attribute:
            why = f"{failed.module} has no attribute {entry.partition(':')[2]!r}"
            message = f"cannot load tool {entry!r}: {why}{failed.hint}"
            raise (ToolLoadError(message) if failed.hint else ToolGone(message, entry, why)) from None
        raise ToolLoadError(f"cannot load tool {entry!r}: {_first_line(failed.cause)}") from None
    except Ambiguous as exc:
        raise ToolLoadError(f"tool {exc}") from None
    tools = as_tools(target, entry)
    if not tools:
        raise ToolLoadError(f"tool {entry!r} holds no tool (an empty list); name at least one, or take the path out")
    return tools


def as_tools(target: Any, entry: str) -> list[Tool]:
    if isinstance(target, Tool):
        return [target]
    if inspect.isclass(target) and issubclass(target, Tool) and isinstance(getattr(target, "name", None), str):
        return [target()]
    if isinstance(target, (list, tuple)):
        found: list[Tool] = []
        for item in target:
            found.extend(as_tools(item, entry))
        return found
    what = "a function not decorated with @tool" if callable(target) else type(target).__name__
    raise ToolLoadError(f"tool {entry!r} is {what}, not a tool; decorate it with chronicle's @tool or name a Tool class")


def _first_line(exc: BaseException) -> str:
    text = (str(exc).strip().splitlines() or [""])[0]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
