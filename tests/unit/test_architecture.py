"""The dependency rule and the generated diagrams, checked rather than hoped for."""

from __future__ import annotations

import ast
import json
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


def test_readme_benchmark_headline_is_generated_from_the_committed_results():
    """README's bench table is ops/bench/RESULTS.json's judged targets: a run committed without
    `ops/bench/readme.py --write` (or a hand edit of the table) fails here."""
    result = subprocess.run([sys.executable, str(ROOT / "ops" / "bench" / "readme.py"), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    results = json.loads((ROOT / "ops" / "bench" / "RESULTS.json").read_text(encoding="utf-8"))
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert f"commit {results['meta']['chronicle commit']}" in readme
    assert all(f"| {row[0].replace('|', chr(92) + '|')} |" in readme for row in results["sections"]["targets"]["rows"])


def _runtime_import_graph() -> dict[str, set[str]]:
    """Module → runtime modules it imports at module level (what runs on import; TYPE_CHECKING blocks and
    imports inside functions are left out)."""
    root = ROOT / "runtime"
    modules: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(["chronicle.runtime", *parts])] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        found: set[str] = set()
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ImportFrom):
                base = package.split(".")[: len(package.split(".")) - max(node.level - 1, 0)] if node.level else []
                module = ".".join(base + ([node.module] if node.module else [])) if node.level else (node.module or "")
                found |= {m for m in [module, *(f"{module}.{a.name}" for a in node.names)] if m in modules and m != name}
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name in modules}
        graph[name] = found - {"chronicle.runtime"}
    return graph


def test_runtime_has_no_import_cycles():
    graph = _runtime_import_graph()
    cycles = []

    def reach(start: str) -> bool:
        seen, stack = set(), list(graph[start])
        while stack:
            node = stack.pop()
            if node == start:
                return True
            if node not in seen:
                seen.add(node)
                stack.extend(graph[node])
        return False

    cycles = sorted(m for m in graph if reach(m))
    assert cycles == []


def test_cli_modules_reach_use_cases_only_through_the_application_layer():
    """Parsing and rendering only: no CLI module builds loops, records decisions or queries projections itself."""
    forbidden = ("chronicle.runtime.loop_io", "chronicle.runtime.read_models", "chronicle.runtime.timetravel",
                 "chronicle.runtime.controls", "chronicle.runtime.sessions", "chronicle.runtime.toolsets", "chronicle.projections")
    offenders = [
        f"{p.name}: {m}" for p in sorted((ROOT / "runtime" / "cli").glob("*.py"))
        for m, _ in imports_of(p) if m.startswith(forbidden) and p.name != "projections_cmd.py"
    ]
    assert offenders == []
