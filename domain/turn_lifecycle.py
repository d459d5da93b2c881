"""The Turn's transition table: pending, running, waiting for approval, interrupted, and how it ends.

A table rather than behaviour: the aggregate asks it before recording a change of status,
ops/diagrams.py draws it, the lifecycle tests walk it. chronicle.domain.turn re-exports it,
which is where those readers import it from.
"""

from __future__ import annotations

from .lifecycle import Edge, Lifecycle

LIVE = ("pending", "running", "awaiting_approval", "interrupted")
TURN_LIFECYCLE = Lifecycle(
    "Turn",
    states=["pending", "running", "awaiting_approval", "completed", "failed", "cancelled", "stopped", "interrupted"],
    initial="pending",
    edges=[
        Edge("start", ("pending",), "running"),
        Edge("await_approval", ("running",), "awaiting_approval"),
        Edge("resume", ("awaiting_approval", "interrupted"), "running"),
        Edge("complete", ("running",), "completed"),
        Edge("fail", LIVE, "failed"),
        Edge("cancel", LIVE, "cancelled"),
        Edge("stop", LIVE, "stopped"),
        Edge("interrupt", ("running", "pending"), "interrupted"),
    ],
    terminal={"completed", "failed", "cancelled", "stopped"},
)
