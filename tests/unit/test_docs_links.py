"""README.md and the guides under docs/ link to each other by file and heading; a heading renamed or
a section moved without its links would leave a reader at a dead end, so every relative link is
checked: its file exists and, with `#anchor`, a heading there makes that anchor (GitHub's rule:
lower case, punctuation dropped, spaces as hyphens)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def headings(path: Path) -> list[str]:
    """The anchor each heading makes, in order."""
    found, fenced = [], False
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.startswith("#"):
            title = re.sub(r"[^\w\- ]", "", line.lstrip("#").strip().lower())
            found.append(title.replace(" ", "-"))
    return found


def anchors(path: Path) -> set[str]:
    return set(headings(path))


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def test_every_guide_is_listed_in_the_readme() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert [p.name for p in documents()[1:] if f"(docs/{p.name})" not in readme] == []


def test_every_relative_link_names_a_file_and_a_heading_that_exist() -> None:
    broken = []
    for doc in documents():
        for target in LINK.findall(doc.read_text(encoding="utf-8")):
            if target.startswith(("http://", "https://", "mailto:")):
                continue
            path, _, anchor = target.partition("#")
            dest = (doc.parent / path) if path else doc
            if not dest.exists():
                broken.append(f"{doc.name}: {target} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
                broken.append(f"{doc.name}: {target} (no such heading)")
    assert broken == []


def test_no_two_headings_of_a_guide_make_the_same_anchor() -> None:
    """GitHub numbers a repeated anchor (`#tools-1`), so a link to the first would land on the other."""
    repeated = {doc.name: sorted({a for a in headings(doc) if headings(doc).count(a) > 1}) for doc in documents()}
    assert {name: found for name, found in repeated.items() if found} == {}
