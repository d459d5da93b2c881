"""Use-case modules imported when a command first uses them, not when its `--help` is shown.

A command module must be imported for typer to show the command's flags, and the application
layer it calls imports the loop, pydantic, the store and the providers: about half a second that
`chronicle undo --help` paid before printing a line. The standard library's LazyLoader defers a
module's execution to its first attribute access, so a command module names its use cases as
before and pays for them only when it runs them. The module's package is imported at once (finding
the module needs it): a package whose `__init__` is heavy (`runtime/tools`) is no place for this,
and a command imports from it in its body instead (`mcp_cmd.py`).
"""

from __future__ import annotations

import importlib.util
import sys
from types import ModuleType


def lazy_module(name: str) -> ModuleType:
    """`name`, imported already, or a stand-in that imports it on first attribute access."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:  # as an import binds a submodule on its package (find_spec imported the package)
        setattr(sys.modules[parent], child, module)
    return module
