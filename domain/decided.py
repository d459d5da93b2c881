"""Events that record a decision someone made, and who made it.

`actor` (user@host from the CLI, the caller's identity from the API) was added to every such
event in their v2; one base holds that field and its upcaster, so eight event classes do not
each carry a copy of the same three lines.
"""

from __future__ import annotations

from typing import Any

from eventsourcing.domain import Aggregate


class Decided(Aggregate.Event):
    """v2 added `actor`: who decided; None on events recorded before anyone was named."""

    class_version = 2
    actor: str | None

    @staticmethod
    def upcast_v1_v2(state: dict[str, Any]) -> None:
        state["actor"] = None
