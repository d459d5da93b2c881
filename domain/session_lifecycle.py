"""The Session's transition table: idle while it waits for input, busy while a turn runs.

A table rather than behaviour: the aggregate asks it before recording TurnStarted or TurnEnded,
ops/diagrams.py draws it, the lifecycle tests walk it. chronicle.domain.session re-exports it,
which is where those readers import it from.
"""

from __future__ import annotations

from .lifecycle import Edge, Lifecycle

SESSION_LIFECYCLE = Lifecycle(
    "Session",
    states=["idle", "busy"],
    initial="idle",
    edges=[
        Edge("start_turn", ("idle",), "busy"),
        Edge("end_turn", ("busy",), "idle"),
    ],
    terminal=set(),
)
