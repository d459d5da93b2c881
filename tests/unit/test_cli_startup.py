"""`chronicle --version` answers before importing any command, the store or a provider SDK."""

from __future__ import annotations

import subprocess
import sys

PROBE = """
import sys
sys.argv = ["chronicle", "--version"]
from chronicle.runtime.cli.entry import main
main()
heavy = ("chronicle.runtime.cli.app", "chronicle.runtime.store", "chronicle.client", "anthropic", "eventsourcing", "pydantic", "typer")
print(sorted(m for m in sys.modules if m.startswith(heavy)))
"""


def test_version_imports_nothing_heavy():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    first, loaded = out.stdout.splitlines()
    assert first.startswith("chronicle ")
    assert loaded == "[]"


def test_the_library_names_still_import_from_the_package():
    from chronicle import Agent, Chronicle, ToolError, TurnEnd, tool

    assert callable(tool) and Agent and Chronicle and TurnEnd and issubclass(ToolError, Exception)
