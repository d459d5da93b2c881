"""What `pip install /path/to/chronicle` (not editable) installs: every package of the source tree, the viewer's
templates and the PEP 561 marker. The suite runs on an editable install, whose package-dir map serves any
directory whether pyproject.toml lists it or not, so a new package left off the list would pass here and be
missing from a user's install (`chronicle serve` without its templates, an import error at start)."""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONFIG = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]


def source_packages() -> set[str]:
    """Each directory of the source tree with an __init__.py, by the name it is installed under."""
    found = set()
    for name, directory in CONFIG["package-dir"].items():
        base = ROOT / directory
        for init in base.rglob("__init__.py"):
            parts = init.parent.relative_to(base).parts
            if "__pycache__" not in parts:
                found.add(".".join((name, *parts)))
    return found


def test_every_package_of_the_source_tree_is_installed():
    listed = set(CONFIG["packages"])
    assert source_packages() - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    data_only = listed - source_packages()  # a folder of data with no module (the viewer's templates)
    assert data_only <= set(CONFIG["package-data"]), "pyproject.toml lists packages the tree does not have"
    assert all(_directory(name).is_dir() for name in data_only), "pyproject.toml lists packages the tree does not have"


def _directory(package: str) -> Path:
    """Where the source tree holds an installed package's files (by the longest package-dir prefix)."""
    prefix = max((p for p in CONFIG["package-dir"] if package == p or package.startswith(p + ".")), key=len)
    return ROOT / CONFIG["package-dir"][prefix] / Path(*package[len(prefix):].strip(".").split(".") if package != prefix else ())


def test_the_type_marker_and_the_templates_are_installed():
    data = CONFIG["package-data"]
    assert "py.typed" in data["chronicle"] and (ROOT / "chronicle" / "py.typed").is_file()
    assert (ROOT / "runtime" / "server" / "templates").is_dir() and "*.html" in data["chronicle.runtime.server.templates"]
