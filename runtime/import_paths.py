"""User code named by import path (`package.module:attribute`): tools, guardrail checks, middleware.

A session records the user's code by import path so that any process (a worker, `resume`, the
server) can load it again. The process that defined the code (a program using the Python API, or
a script run directly, whose `__main__` no other process can import) registers it under that path,
and is served from the registry. One loader, so the three kinds find, import and report alike.
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any


class NotLoadable(Exception):
    """An import path that names nothing: `cause` is what the import or attribute lookup raised."""

    def __init__(self, path: str, cause: BaseException, missing_attribute: bool) -> None:
        super().__init__(path)
        self.path, self.cause, self.missing_attribute = path, cause, missing_attribute

    @property
    def module(self) -> str:
        return self.path.partition(":")[0]

    @property
    def first_line(self) -> str:
        """The cause's first line: what the user needs to see, without a traceback."""
        return (str(self.cause).strip().splitlines() or [type(self.cause).__name__])[0]

    @property
    def hint(self) -> str:
        if self.module != "__main__":
            return ""
        return "; code defined in a script run directly loads only in that process: move it into a module"


def path_of(target: Any) -> str:
    """The import path another process would use for a function or class (or an instance's class)."""
    return f"{getattr(target, '__module__', '')}:{getattr(target, '__qualname__', type(target).__qualname__)}"


def remembered(defined: dict[str, Any], target: Any) -> str:
    """`target`'s import path (a path given as text is kept), with `target` remembered under it in
    `defined`, so this process loads it even where no other process could (a script run directly)."""
    if isinstance(target, str):
        return target
    path = path_of(target)
    defined[path] = target
    return path


def is_well_formed(path: str) -> bool:
    module_name, _, attribute = path.partition(":")
    return bool(module_name.strip() and attribute.strip())


def make_importable(workspace: Path | None) -> None:
    """The workspace's modules can be named in import paths; appended, so a workspace file never shadows
    an installed module (a `json.py` in the workspace must not replace the standard library's)."""
    if workspace is not None:
        where = str(Path(workspace).resolve())
        if where not in sys.path:
            sys.path.append(where)


def load(path: str, workspace: Path | None, defined: dict[str, Any]) -> Any:
    """What a well-formed `path` names: from `defined` if this process registered it (importing the
    module may register it, as `@tool` does), else imported. Raises NotLoadable."""
    if path in defined:
        return defined[path]
    module_name, _, attribute = path.partition(":")
    make_importable(workspace)
    try:
        target: Any = importlib.import_module(module_name)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - whatever the module raises (sys.exit too), the user needs its first line
        raise NotLoadable(path, exc, missing_attribute=False) from None
    if path in defined:
        return defined[path]
    for part in attribute.split("."):
        try:
            target = getattr(target, part)
        except AttributeError as exc:
            raise NotLoadable(path, exc, missing_attribute=True) from None
    return target
