"""README's benchmark headline, generated from ops/bench/RESULTS.json (never by hand).

    python ops/bench/readme.py           # print the block
    python ops/bench/readme.py --write   # rewrite the block between the markers in README.md
    python ops/bench/readme.py --check   # exit 1 if README.md does not match RESULTS.json

The headline used to be a table copied by hand from each run; it fell a run behind RESULTS.md and
said so in prose. It is now the run's own judged targets (ops/bench/targets.py) with the run's
date, commit and machine, so README and RESULTS.md cannot disagree. Only the standard library is
imported: the test that checks README runs without the bench dependencies installed.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
README = HERE.parent.parent / "README.md"
RESULTS = HERE / "RESULTS.json"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|")


def render(results: dict[str, Any]) -> str:
    meta = results["meta"]
    targets = results["sections"].get("targets")
    parts = [BEGIN]
    if not targets:
        parts += ["The last run recorded in RESULTS.json judged no targets.", END]
        return "\n".join(parts)
    counts = targets["counts"]
    load = meta.get("load average at start", "?")
    parts += [
        f"From `ops/bench/RESULTS.json`: {meta.get('mode', 'bench')} of {meta.get('date', '?')}, commit "
        f"{meta.get('chronicle commit', '?')}, {meta.get('cores', '?')} cores ({meta.get('cpu', '?')}), load {load} at the start; "
        f"LangGraph {meta.get('langgraph', '?')}. **{counts.get('met', 0)} targets met, {counts.get('missed', 0)} missed, "
        f"{counts.get('not measured', 0)} not measured.** \"Cold\" is a store just opened, as a new process has; "
        "\"open store\" one kept open, as a library program or the server reads.",
        "",
        "| target (issue 12) | this run | status |",
        "| --- | --- | --- |",
    ]
    parts += [f"| {_cell(t)} | {_cell(shown)} | {_cell(status)} |" for t, shown, status in targets["rows"]]
    parts.append(END)
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    block = render(json.loads(RESULTS.read_text(encoding="utf-8")))
    if "--write" not in argv and "--check" not in argv:
        print(block)
        return 0
    text = README.read_text(encoding="utf-8")
    start, end = text.index(BEGIN), text.index(END) + len(END)
    updated = text[:start] + block + text[end:]
    if "--check" in argv:
        if updated != text:
            print("README.md's benchmark block does not match ops/bench/RESULTS.json: run "
                  "`python ops/bench/readme.py --write`", file=sys.stderr)
            return 1
        return 0
    README.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
