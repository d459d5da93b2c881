"""The `chronicle` executable's first step: answer `--version` before importing any command.

Every command module imports what it runs (the store, the loop, providers), so importing the
command table costs most of a second; a version check needs none of it.
"""

from __future__ import annotations

import sys


def version_text() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"chronicle {version('chronicle-agent')}"
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "chronicle (not installed)"


def main() -> None:
    if sys.argv[1:] in (["--version"], ["-V"]):
        sys.stdout.write(version_text() + "\n")
        return
    from .app import main as run

    run()
