"""Every package our code imports is one pyproject.toml asks for, in the group that needs it.

The dev environment installs every extra and the dev tools, so an import of a package nothing
declares still works here and fails on a user's machine: `chronicle serve` from a plain
`pip install '.[server]'` died on `import httpx` (the outbox's POSTs), which only the dev extra
and, in older releases, the Anthropic SDK had brought in. Relying on a dependency's dependency
breaks as soon as it changes its own (anthropic now uses httpx2), so a direct import must be a
direct requirement: of the core, or of the extra whose feature the module is.
"""

from __future__ import annotations

import ast
import importlib.metadata as metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SOURCES = ("chronicle", "domain", "projections", "runtime")
#: Modules that belong to an extra's feature, by path prefix: they may import that extra's packages.
EXTRA_OF = {"runtime/server/": "server", "runtime/cli/serve_cmd.py": "server", "runtime/cli/serve_drain.py": "server",
            "runtime/telemetry/": "otel"}
#: Packages that are a declared requirement's own part, pinned by it (not a dependency that may change).
PART_OF = {"pydantic-core": "pydantic", "typing-extensions": "pydantic", "starlette": "fastapi"}


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _names(requirements: list[str]) -> set[str]:
    return {_normal(re.split(r"[\s\[<>=!~;]", req, maxsplit=1)[0]) for req in requirements}


def _checking_only(node: ast.AST) -> bool:
    """`if TYPE_CHECKING:`: imports a type checker reads and the running code never makes (an extra's, for a signature)."""
    test = node.test if isinstance(node, ast.If) else None
    return isinstance(test, ast.Name | ast.Attribute) and getattr(test, "id", getattr(test, "attr", None)) == "TYPE_CHECKING"


def _runtime_nodes(node: ast.AST) -> list[ast.AST]:
    found = [node]
    for child in ast.iter_child_nodes(node):
        if _checking_only(child):
            assert isinstance(child, ast.If)
            found.extend(n for other in child.orelse for n in _runtime_nodes(other))
        else:
            found.extend(_runtime_nodes(child))
    return found


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return {name for name in found if name not in sys.stdlib_module_names and name != "chronicle"}


def _undeclared() -> list[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    core = _names(project["dependencies"])
    extras = {extra: _names(reqs) for extra, reqs in project["optional-dependencies"].items()}
    distributions = metadata.packages_distributions()
    wrong = []
    for top in SOURCES:
        for path in sorted((ROOT / top).rglob("*.py")):
            relative = path.relative_to(ROOT).as_posix()
            extra = next((name for prefix, name in EXTRA_OF.items() if relative.startswith(prefix)), None)
            allowed = core | (extras[extra] if extra else set())
            for module in sorted(_imports(path)):
                dists = {_normal(d) for d in distributions.get(module, [module])}
                if not any(d in allowed or PART_OF.get(d) in allowed for d in dists):
                    wrong.append(f"{relative} imports {module} ({', '.join(sorted(dists))}), which "
                                 f"{'the core and [' + extra + ']' if extra else 'the core dependencies'} do not declare")
    return wrong


def test_every_imported_package_is_declared_for_the_modules_that_import_it():
    assert _undeclared() == []


def test_the_check_finds_an_undeclared_import(tmp_path, monkeypatch):
    """The check itself: a module importing a package no group declares is named."""
    fake = tmp_path / "runtime" / "server"
    fake.mkdir(parents=True)
    (fake / "poster.py").write_text("import requests\nimport fastapi\n")
    (tmp_path / "chronicle").mkdir()
    (tmp_path / "chronicle" / "typed.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import fastapi\n"
                                                    "else:\n    import uvicorn\n")
    for top in ("domain", "projections"):
        (tmp_path / top).mkdir()
    (tmp_path / "pyproject.toml").write_text((ROOT / "pyproject.toml").read_text())
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    wrong = _undeclared()  # a core module's import for a type checker alone is not one it makes; its `else:` is
    assert [w.split(" (")[0] for w in wrong] == ["chronicle/typed.py imports uvicorn", "runtime/server/poster.py imports requests"], wrong


#: The lowest version of a requirement that the code runs on, where an older one that pyproject once allowed does
#: not: each was found by installing the floors (`uv pip compile --resolution lowest-direct`) and running the CLI.
NEEDS = {
    "typer": ((0, 26), "`typer._click`, typer's own click, which the CLI's option types subclass"),
    "mcp": ((2, 0), "`from mcp import Client` (runtime/tools/mcp_hub.py)"),
    "pydantic-settings": ((2, 7), "`NoDecode` (runtime/environment.py)"),
    "openai": ((1, 55, 3), "httpx 0.28 (older clients pass it the `proxies` argument it removed)"),
}


def _floors() -> dict[str, tuple[int, ...]]:
    floors = {}
    for requirement in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]:
        floor = re.search(r"(?:>=|==)\s*([\d.]+)", requirement)
        if floor:
            floors[_normal(re.split(r"[\s\[<>=!~;]", requirement, maxsplit=1)[0])] = tuple(int(p) for p in floor.group(1).split("."))
    return floors


def test_no_floor_is_below_what_the_code_needs():
    """A lower floor installs (pip picks the newest it can, so the dev environment never sees it) and then fails on
    a user's machine that has the older version: `chronicle sessions` died on typer 0.25 (no `typer._click`)."""
    floors = _floors()
    low = [f"{name} >= {'.'.join(map(str, floors.get(name, (0,))))} allows what lacks {why}; needs {'.'.join(map(str, need))}"
           for name, (need, why) in NEEDS.items() if floors.get(name, (0,)) < need]
    assert low == []
