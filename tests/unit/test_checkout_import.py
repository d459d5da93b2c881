"""A program run in the repository's root imports the checkout's `chronicle/`, whatever is installed.

With a plain (not editable) install, `python -c "import chronicle; chronicle.Agent"` in the root said "No module named
'chronicle.domain'": ./chronicle shadows the installed package, and domain/, projections/ and runtime/ sit beside it,
where only pyproject.toml's package-dir (an install) put them under it. chronicle/__init__.py now finds them there,
in a checkout only; an installed package (its subpackages inside it) is left as it is.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

from tests.api.test_typed_api import installed_layout

ROOT = Path(__file__).resolve().parents[2]
#: Without site (-S) no .pth file runs, so the editable install's finder is absent, as in an environment where
#: Chronicle was installed from a wheel; the dependencies come from this environment's site-packages.
PROBE = """
import sys
sys.path.append({site!r})
import chronicle, chronicle.domain.session
from chronicle import Agent
print(chronicle.__path__)
print(chronicle.domain.__file__)
"""


def _probe(cwd: Path) -> list[str]:
    site = sysconfig.get_paths()["purelib"]
    done = subprocess.run([sys.executable, "-S", "-c", PROBE.format(site=site)], cwd=cwd, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


def test_the_checkout_root_imports_the_whole_package_from_the_checkout():
    paths, domain = _probe(ROOT)
    assert paths == str([str(ROOT / "chronicle"), str(ROOT)])
    assert domain == str(ROOT / "domain" / "__init__.py")


def test_an_installed_layout_is_left_alone(tmp_path):
    installed = installed_layout(tmp_path / "site")
    paths, domain = _probe(installed)
    assert paths == str([str(installed / "chronicle")])
    assert domain == str(installed / "chronicle" / "domain" / "__init__.py")
