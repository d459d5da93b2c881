"""The dependency rule and the generated diagrams, checked rather than hoped for."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOMAIN_ALLOWED = {"pydantic", "pydantic_core", "eventsourcing", "transitions", "__future__"}
STDLIB = set(sys.stdlib_module_names)
IO_STDLIB = {"sqlite3", "socket", "subprocess", "http", "urllib", "asyncio", "os", "shutil", "random", "time"}


def imports_of(path: Path) -> list[tuple[str, str]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(alias.name, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.module, node.module.split(".")[0]))
    return found


def test_the_domain_imports_no_io_and_no_outer_layer():
    offenders = []
    for path in sorted((ROOT / "domain").glob("*.py")):
        for module, top in imports_of(path):
            if module.startswith("eventsourcing") and module not in ("eventsourcing.domain",):
                offenders.append(f"{path.name}: {module}")
            elif top in IO_STDLIB or (top not in STDLIB and top not in DOMAIN_ALLOWED):
                offenders.append(f"{path.name}: {module}")
    assert offenders == []


def test_projections_do_not_import_the_runtime():
    offenders = [
        f"{p.name}: {m}" for p in sorted((ROOT / "projections").rglob("*.py"))
        for m, _ in imports_of(p) if m.startswith("chronicle.runtime")
    ]
    assert offenders == []


def test_readme_state_diagrams_are_generated_from_the_transition_tables():
    result = subprocess.run([sys.executable, str(ROOT / "ops" / "diagrams.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "awaiting_approval --> approved: approve" in readme
