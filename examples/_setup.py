"""What the examples share: which model to ask and where to work.

With ANTHROPIC_API_KEY set they ask Claude; without it they run offline against the scripted
model beside them (examples/scripts/), which is also how the test suite runs them.
CHRONICLE_DB picks the store (default: .chronicle/chronicle.db here), CHRONICLE_WORKSPACE the
directory the agent may touch (default: a fresh temporary one).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent / "scripts"


def provider(script: str) -> str:
    if os.environ.get("CHRONICLE_PROVIDER"):
        return os.environ["CHRONICLE_PROVIDER"]
    return "anthropic" if os.environ.get("ANTHROPIC_API_KEY") else f"scripted:{SCRIPTS / script}"


def workspace() -> Path:
    chosen = os.environ.get("CHRONICLE_WORKSPACE")
    path = Path(chosen) if chosen else Path(tempfile.mkdtemp(prefix="chronicle-example-"))
    path.mkdir(parents=True, exist_ok=True)
    return path
