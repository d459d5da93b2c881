"""Generate the README's state diagrams from the domain's transition tables (never by hand).

    python ops/diagrams.py           # print the mermaid blocks
    python ops/diagrams.py --write   # rewrite the block between the markers in README.md
    python ops/diagrams.py --check   # exit 1 if README.md is out of date
"""

from __future__ import annotations

import sys
from pathlib import Path

from transitions.extensions import GraphMachine

from chronicle.domain.job import JOB_LIFECYCLE
from chronicle.domain.repair import REPAIR_LIFECYCLE
from chronicle.domain.routine_run import ROUTINE_RUN_LIFECYCLE
from chronicle.domain.session import SESSION_LIFECYCLE
from chronicle.domain.task_board import TASK_LIFECYCLE
from chronicle.domain.tool_call import TOOL_CALL_LIFECYCLE
from chronicle.domain.turn import TURN_LIFECYCLE

README = Path(__file__).resolve().parent.parent / "README.md"
BEGIN, END = "<!-- diagrams:begin -->", "<!-- diagrams:end -->"


def mermaid(lifecycle) -> str:  # type: ignore[no-untyped-def]
    definition = lifecycle.definition()
    holder = type("Holder", (), {})()
    GraphMachine(  # binds the diagram methods to holder
        model=holder, states=definition["states"], initial=definition["initial"],
        transitions=definition["transitions"], auto_transitions=False, graph_engine="mermaid",
        show_conditions=False,
    )
    source = holder.get_graph().source
    body = source[source.index("stateDiagram-v2"):]
    # Drop the current-state highlighting: a diagram of the kind, not of one instance.
    lines = [ln for ln in body.splitlines() if not ln.strip().startswith(("classDef", "Class "))]
    return "\n".join(ln for ln in lines if ln.strip())


def render() -> str:
    parts = [BEGIN]
    for lifecycle in (SESSION_LIFECYCLE, TURN_LIFECYCLE, TOOL_CALL_LIFECYCLE, TASK_LIFECYCLE, ROUTINE_RUN_LIFECYCLE, REPAIR_LIFECYCLE, JOB_LIFECYCLE):
        parts += [f"**{lifecycle.kind}**", "", "```mermaid", mermaid(lifecycle), "```", ""]
    parts.append(END)
    return "\n".join(parts)


def main(argv: list[str]) -> int:
    block = render()
    if "--write" in argv or "--check" in argv:
        text = README.read_text(encoding="utf-8")
        start, end = text.index(BEGIN), text.index(END) + len(END)
        updated = text[:start] + block + text[end:]
        if "--check" in argv:
            if updated != text:
                print("README.md diagrams are out of date: run `make diagrams`", file=sys.stderr)
                return 1
            return 0
        README.write_text(updated, encoding="utf-8")
        return 0
    print(block)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
