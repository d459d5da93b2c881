"""`make bench`'s own arguments: a backend it does not know is refused before anything runs.

`--backends postgresql` (the name the store's URLs use) used to be passed on as an unknown
backend: every section then failed on a missing PostgreSQL server after the SQLite half ran."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RUN = Path(__file__).resolve().parents[2] / "ops" / "bench" / "run.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUN), *args], capture_output=True, text=True, timeout=60)


def test_an_unknown_backend_is_refused_with_the_choices():
    done = _run("--backends", "sqlite,mysql", "--sections", "startup")
    assert done.returncode == 2
    assert "unknown backend(s): mysql; choose from sqlite, postgres" in done.stderr


def test_no_backend_at_all_is_refused():
    done = _run("--backends", " , ", "--sections", "startup")
    assert done.returncode == 2
    assert "(none given)" in done.stderr

