"""Errors the domain raises when a command is refused. A refused command records nothing."""


class DomainError(Exception):
    """A command that the aggregate's current state does not allow."""


class IllegalTransition(DomainError):
    """A lifecycle trigger that is not allowed from the aggregate's current state."""

    def __init__(self, kind: str, aggregate_id: object, state: str, trigger: str, allowed: list[str]):
        self.kind, self.aggregate_id, self.state, self.trigger = kind, aggregate_id, state, trigger
        allowed_text = ", ".join(allowed) or "nothing (terminal state)"
        super().__init__(
            f"{kind} {aggregate_id}: cannot {trigger} while {state}; allowed from {state}: {allowed_text}"
        )
