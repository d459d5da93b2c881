"""runtime/cli/lazy.py: a use-case module named lazily is imported at its first use, and is then the
same module every other import gets (in a fresh interpreter: this one has imported them all)."""

from __future__ import annotations

import json
import subprocess
import sys

PROBE = r"""
import json, sys
from chronicle.runtime.cli.lazy import lazy_module
controls = lazy_module("chronicle.runtime.app.controls")
before = "pydantic" in sys.modules
steer = controls.steer  # first use: the module runs now
after = "pydantic" in sys.modules
import chronicle.runtime.app as app
from chronicle.runtime.app import controls as imported
again = lazy_module("chronicle.runtime.app.controls")
try:
    lazy_module("chronicle.runtime.app.no_such_module")
    missing = None
except ModuleNotFoundError as exc:
    missing = exc.name
print(json.dumps({"before": before, "after": after, "callable": callable(steer), "bound": app.controls is controls,
                  "same": imported is controls and again is controls, "missing": missing}))
"""


def test_a_lazy_module_runs_at_first_use_and_is_the_module_every_import_gets():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[-1]) == {
        "before": False, "after": True, "callable": True, "bound": True, "same": True,
        "missing": "chronicle.runtime.app.no_such_module",
    }
