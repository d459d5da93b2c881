"""Tools by import path (`package.module:attribute`), so any process can run a session's tools.

A session records its tools as names: built-ins by name, the user's tools by import path. The
process that defined a tool (a program using the Python API) finds it in `_DEFINED`; any other
process (`chronicle resume`, a worker on another machine) imports it, with the workspace
directory importable. A path that does not load is a one-line error naming it, raised before
anything is recorded, and again when a session that needs it is resumed.
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

from .base import Tool

#: Tools defined in this process, by import path: `@tool` registers each one it makes.
_DEFINED: dict[str, Tool] = {}


class ToolLoadError(ValueError):
    """A tool entry that names nothing loadable, or something that is not a tool."""


def is_import_path(entry: str) -> bool:
    return ":" in entry


def remember(tool: Tool, path: str | None = None) -> str:
    """Make `tool` loadable by its import path in this process, even if no other process can import it."""
    key = path or getattr(tool, "import_path", "") or f"{type(tool).__module__}:{type(tool).__qualname__}"
    _DEFINED[key] = tool
    return key


def make_importable(workspace: Path | None) -> None:
    """The workspace's modules can be named in tool paths; appended, so a workspace file never shadows
    an installed module (a `json.py` in the workspace must not replace the standard library's)."""
    if workspace is not None:
        where = str(Path(workspace).resolve())
        if where not in sys.path:
            sys.path.append(where)


def load_tools(entry: str, workspace: Path | None = None) -> list[Tool]:
    """The tool(s) an import path names: a @tool function, a Tool class or instance, or a list of them."""
    if entry in _DEFINED:
        return [_DEFINED[entry]]
    module_name, _, attribute = entry.partition(":")
    if not module_name.strip() or not attribute.strip():
        raise ToolLoadError(f"tool {entry!r}: write a tool path as package.module:attribute")
    make_importable(workspace)
    try:
        target: Any = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever the module raises (sys.exit too), the user needs its first line
        raise ToolLoadError(f"cannot load tool {entry!r}: {_first_line(exc)}") from None
    if entry in _DEFINED:  # importing ran the @tool decorator, which registered it under this very path
        return [_DEFINED[entry]]
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            hint = "; a tool defined in a script run directly loads only in that process: move it into a module" \
                if module_name == "__main__" else ""
            raise ToolLoadError(f"cannot load tool {entry!r}: {module_name} has no attribute {attribute!r}{hint}") from None
    return as_tools(target, entry)


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
