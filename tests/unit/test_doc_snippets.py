"""The Python in README.md and docs/*.md still names what the library has.

The snippets call a model, a database or a program's own functions, so they are not run here
(examples/ holds programs that run: tests/api/test_examples.py); what drifts silently is a
name: an export renamed, an `Agent` field or a method that no longer exists. Each block must
parse, import only what `chronicle` exports, build `Agent`s and the checks with keywords they
take, and call `Chronicle` methods that exist.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import re
from pathlib import Path

import pytest

import chronicle

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks() -> list[tuple[str, str]]:
    found = []
    for doc in DOCS:
        for number, match in enumerate(BLOCK.finditer(doc.read_text()), start=1):
            found.append((f"{doc.relative_to(ROOT)}#{number}", match.group(1)))
    return found


def _keywords(target: object) -> set[str] | None:
    """The keyword names `target(...)` accepts, or None when it takes any."""
    if dataclasses.is_dataclass(target):
        return {field.name for field in dataclasses.fields(target) if field.init}
    try:
        parameters = inspect.signature(target).parameters.values()  # type: ignore[arg-type]
    except ValueError:  # an exception class (ToolError, Rejected): its message is all it takes
        return None
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return None
    return {p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}


def _problems(source: str) -> list[str]:
    tree = ast.parse(source)
    imported: dict[str, object] = {}
    problems = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "chronicle":
            for alias in node.names:
                if alias.name not in chronicle.__all__:
                    problems.append(f"chronicle exports no {alias.name}")
                else:
                    imported[alias.asname or alias.name] = getattr(chronicle, alias.name)
    apps = {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call)
            and isinstance(node.value.func, ast.Name) and imported.get(node.value.func.id) is chronicle.Chronicle
            for target in node.targets if isinstance(target, ast.Name)}
    apps |= {item.optional_vars.id for node in ast.walk(tree) if isinstance(node, ast.With) for item in node.items
             if isinstance(item.optional_vars, ast.Name) and isinstance(item.context_expr, ast.Call)
             and isinstance(item.context_expr.func, ast.Name) and imported.get(item.context_expr.func.id) is chronicle.Chronicle}
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        if isinstance(node.func, ast.Name) and callable(imported.get(node.func.id)):
            accepted = _keywords(imported[node.func.id])
            for keyword in node.keywords:
                if keyword.arg is not None and accepted is not None and keyword.arg not in accepted:
                    problems.append(f"{node.func.id}() takes no {keyword.arg}=")
        if isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) and node.func.value.id in apps:
            method = getattr(chronicle.Chronicle, node.func.attr, None)
            if method is None:
                problems.append(f"Chronicle has no {node.func.attr}()")
                continue
            accepted = _keywords(method)
            for keyword in node.keywords:
                if keyword.arg is not None and accepted is not None and keyword.arg not in accepted:
                    problems.append(f"Chronicle.{node.func.attr}() takes no {keyword.arg}=")
    return problems


@pytest.mark.parametrize(("where", "source"), _blocks(), ids=[where for where, _ in _blocks()])
def test_a_python_snippet_names_only_what_the_library_has(where, source):
    assert _problems(source) == [], where


def test_there_are_snippets_to_check():
    assert len(_blocks()) >= 4


def test_the_check_names_what_drifted():
    drifted = """
from chronicle import Chronicle, Agent, Tool, Nonexistent, tool
agent = Agent(name="a", tools=[], temperature=0.2)

@tool(read_only=True, cached=True)
def look(x: str) -> str:
    return x
with Chronicle("sqlite:////tmp/x.db") as app:
    app.run_sync(agent, "hi", workspace="/tmp", retries=3)
    app.rewind("abc")
"""
    assert _problems(drifted) == [
        "chronicle exports no Nonexistent",
        "Agent() takes no temperature=",
        "tool() takes no cached=",
        "Chronicle.run_sync() takes no retries=",
        "Chronicle has no rewind()",
    ]
