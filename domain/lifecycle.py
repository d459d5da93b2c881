"""One transition table per aggregate kind, declared once with `transitions`.

The machine is never bound to an aggregate (that breaks snapshots and replay); it is a guard
table. Command methods ask it for the next state *before* triggering an event, and event
bodies apply the change unconditionally, so a later rule change never breaks old replays.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from transitions import Machine

from .errors import IllegalTransition


@dataclass(frozen=True)
class Edge:
    trigger: str
    sources: tuple[str, ...]
    dest: str


class Lifecycle:
    def __init__(self, kind: str, states: list[str], initial: str, edges: list[Edge], terminal: set[str]):
        self.kind = kind
        self.states = states
        self.initial = initial
        self.edges = edges
        self.terminal = frozenset(terminal)

    @cached_property
    def machine(self) -> "Machine":
        """Built when a command first asks it: reading the past (`log`, `history`, a projection)
        replays events, which apply their change unconditionally and never consult it, so a
        read-only command neither imports `transitions` nor builds the four tables."""
        from transitions import Machine

        return Machine(
            model=None,
            states=self.states,
            initial=self.initial,
            transitions=self.definition()["transitions"],
            auto_transitions=False,
        )

    def next_state(self, trigger: str, state: str, aggregate_id: object = "") -> str:
        found = self.machine.get_transitions(trigger, source=state)
        if not found:
            raise IllegalTransition(self.kind, aggregate_id, state, trigger, self.triggers_from(state))
        dest: str | None = found[0].dest
        if dest is None:  # an internal transition (no destination) keeps the state
            return state
        return dest

    def can(self, trigger: str, state: str) -> bool:
        return bool(self.machine.get_transitions(trigger, source=state))

    def triggers_from(self, state: str) -> list[str]:
        return sorted({e.trigger for e in self.edges if state in e.sources})

    def definition(self) -> dict[str, Any]:
        """What diagram generators need: states, initial, transitions."""
        return {
            "states": list(self.states),
            "initial": self.initial,
            "transitions": [
                {"trigger": e.trigger, "source": list(e.sources), "dest": e.dest} for e in self.edges
            ],
        }
