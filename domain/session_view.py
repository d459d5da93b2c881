"""What a Session's state tells without recording anything: the agent spec its turns run with, the
next queued input, the context the model reads.

The Session inherits `SessionView`; apart from it so that the aggregate's module holds its event
vocabulary and the commands that record it. The spec is derived here, not stored again: the one
recorded at the start, with the newest ModelChanged that applies (so every client builds its turns
from one source).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any
from uuid import UUID

if TYPE_CHECKING:  # pydantic models are imported where they are used: replaying a session (log) builds none
    from .agent_spec import AgentSpec


class SessionView:
    """Read-only properties of a Session, from the state its events built."""

    spec_data: dict[str, Any]
    #: Each ModelChanged: {"model", "thinking_tokens", "actor", "at", "from_turn"}, `from_turn` the index in
    #: `turns` of the first turn it applies to (a turn running or paused when it was made keeps its model).
    model_changes: list[dict[str, Any]]
    turns: list[UUID]
    head: list[UUID]
    queue: list[dict[str, Any]]
    compaction: dict[str, Any] | None
    #: Every Compacted, oldest first (`compaction` is the newest); which of them holds depends on the branch.
    compactions: list[dict[str, Any]]

    @property
    def spec(self) -> AgentSpec:
        """The agent as its next turn runs: the spec recorded when the session started, with the model (and
        thinking budget) of its newest ModelChanged, so every client builds its turns from one source."""
        return self._spec_with(self.model_choice)

    def spec_for(self, turn_id: UUID) -> AgentSpec:
        """The spec a turn of this session runs with: the model changes made before it started apply, one
        made while it ran (or waited for approval, or was left by a crash) only to the turns after it."""
        index = self.turns.index(turn_id) if turn_id in self.turns else len(self.turns)
        applied = [c for c in self.model_changes if c["from_turn"] <= index]
        return self._spec_with(applied[-1] if applied else None)

    def _spec_with(self, change: dict[str, Any] | None) -> AgentSpec:
        from .agent_spec import AgentSpec

        spec = AgentSpec.model_validate(self.spec_data)
        if change:
            spec = spec.model_copy(update={"model": change["model"], "thinking_tokens": change.get("thinking_tokens")})
        return spec

    @property
    def model_choice(self) -> dict[str, Any] | None:
        """The newest ModelChanged, None if the session runs on the model it started with."""
        return self.model_changes[-1] if self.model_changes else None

    @property
    def agent_name(self) -> str:
        """`spec.name` without validating the whole spec: `log` and listings need only the name."""
        return str(self.spec_data["name"]) if "name" in self.spec_data else self.spec.name

    @property
    def agent_instance(self) -> str:
        """`spec.instance` without validating the whole spec (`log --tree`, listings): a sub-agent's instance name."""
        return str(self.spec_data.get("instance") or "")

    @property
    def current_model(self) -> str:
        """`spec.model` without validating the whole spec (listings): the newest change, else the start's."""
        return str(self.model_choice["model"] if self.model_choice else self.spec_data.get("model") or "")

    @property
    def next_input(self) -> dict[str, Any] | None:
        return self.queue[0] if self.queue else None

    @property
    def held_compaction(self) -> dict[str, Any] | None:
        """The compaction the model reads the branch's first turns through: the newest whose turns are all still
        on the branch (context_wire.holding_compaction), None when none is."""
        from .context_wire import holding_compaction

        return holding_compaction(self.head, self.compactions)

    def context_view(self) -> tuple[str | None, list[UUID]]:
        """What the model reads: (summary, turn ids). The full record stays in the log."""
        from .context_wire import compacted_view

        return compacted_view(self.head, self.compactions)
