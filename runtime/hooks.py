"""A small typed plugin interface around the loop; guards are written on it.

Hooks see the loop at its safe points. `before_model_call` and `before_tool_call` may stop
the turn (a guard) by returning a Stop; `before_tool_call` may also ask for approval or skip the call;
`check_inbound`, `tool_output` and `check_final` may change or reject the input, a tool's output
and the final answer (runtime/guardrails.py), and `before_finish` may reject the final answer.
The other hooks observe. Hook methods are async so a hook may ask a person or a store.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from .app.errors import DefinitionError

if TYPE_CHECKING:
    from chronicle.domain.content import ModelResponse
    from chronicle.domain.session import Session
    from chronicle.domain.tool_call import ToolCall
    from chronicle.domain.turn import Turn

    from .providers.base import ModelRequest
    from .tools.base import ToolOutput


@dataclass(frozen=True)
class Stop:
    """A guard's verdict: end the turn as `stopped` (exit 4) with this reason, recorded with the guard's name.

    With `error` the turn fails instead (exit 1) with that error recorded: a user's hook that raised
    (runtime/user_hooks.py), or one that rejected the final answer. A user's hook may write
    `Stop(reason="...")`: the guard recorded is then `hook:NAME`, whatever it says."""

    guard: str = ""
    reason: str = ""
    error: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if not self.reason:
            raise DefinitionError("Stop needs a reason: Stop(reason=\"...\")")


@dataclass(frozen=True)
class NeedApproval:
    """Pause this tool call for a person, even if its tool does not require approval."""

    reason: str


@dataclass(frozen=True)
class Skip:
    """Do not run this tool call: it ends `skipped` with this reason (the model reads it) and the turn goes on."""

    reason: str


ToolVerdict = Stop | NeedApproval | Skip | None


@dataclass
class Checked:
    """A text after the checks at one place: what passes on, the marks to record (one per check that
    changed the text, with the text it left, or that failed open, with None), or the Stop of a rejection."""

    text: str
    marks: list[tuple[dict[str, Any], str | None]] = field(default_factory=list)
    stop: Stop | None = None
    #: Who sent the turn's input, as its InputQueued recorded it: {"channel", "senders", "reply"} for a
    #: channel's input, None for one typed, submitted or sent through the API. The final answer goes back to them.
    origin: dict[str, Any] | None = None


def origin_of(session: Any, turn: Any) -> dict[str, Any] | None:
    """Who sent the input `turn` answers (Session.input_origins, from InputQueued v2), or None."""
    origins = getattr(session, "input_origins", None) or {}
    found = origins.get(getattr(turn, "input_id", None))
    return dict(found) if found else None


class Hook:
    """Override what you need; every method defaults to doing nothing."""

    async def before_model_call(self, session: "Session", turn: "Turn", request: "ModelRequest") -> Stop | None:
        return None

    async def after_model_call(self, session: "Session", turn: "Turn", response: "ModelResponse") -> None:
        return None

    async def before_tool_call(self, session: "Session", turn: "Turn", call: "ToolCall") -> ToolVerdict:
        return None

    async def after_tool_call(self, session: "Session", turn: "Turn", call: "ToolCall") -> None:
        return None

    async def on_event(self, event: Any) -> None:
        return None

    async def tool_output(self, call: "ToolCall", output: "ToolOutput") -> "ToolOutput":
        """May replace a tool's output before it is recorded, or raise ToolError to make it the call's failure."""
        return output

    async def before_finish(self, session: "Session", turn: "Turn", response: "ModelResponse") -> Stop | None:
        """May reject the final answer: the turn then fails with the Stop's reason."""
        return None

    async def check_inbound(self, session: "Session", turn: "Turn", checked: Checked) -> Checked:
        """May change the input the model reads (recorded as Turn.GuardrailApplied) or reject it (the turn stops)."""
        return checked

    async def check_final(self, session: "Session", turn: "Turn", checked: Checked) -> Checked:
        """May change the final answer the turn delivers (recorded as Turn.GuardrailApplied) or reject it (the turn fails)."""
        return checked


class Hooks:
    """Runs hooks in order; the first Stop or NeedApproval wins."""

    def __init__(self, hooks: list[Hook] | None = None) -> None:
        self.hooks = list(hooks or [])

    def add(self, hook: Hook) -> None:
        self.hooks.append(hook)

    async def before_model_call(self, *args: Any) -> Stop | None:
        for hook in self.hooks:
            verdict = await hook.before_model_call(*args)
            if verdict is not None:
                return verdict
        return None

    async def after_model_call(self, *args: Any) -> None:
        for hook in self.hooks:
            await hook.after_model_call(*args)

    async def before_tool_call(self, *args: Any) -> ToolVerdict:
        for hook in self.hooks:
            verdict = await hook.before_tool_call(*args)
            if verdict is not None:
                return verdict
        return None

    async def after_tool_call(self, *args: Any) -> None:
        for hook in self.hooks:
            await hook.after_tool_call(*args)

    async def on_event(self, event: Any) -> None:
        for hook in self.hooks:
            await hook.on_event(event)

    async def tool_output(self, call: Any, output: Any) -> Any:
        for hook in self.hooks:
            output = await hook.tool_output(call, output)
        return output

    async def before_finish(self, *args: Any) -> Stop | None:
        for hook in self.hooks:
            verdict = await hook.before_finish(*args)
            if verdict is not None:
                return verdict
        return None

    async def check_inbound(self, session: Any, turn: Any, text: str) -> Checked:
        checked = Checked(text, origin=origin_of(session, turn))
        for hook in self.hooks:
            checked = await hook.check_inbound(session, turn, checked)
            if checked.stop is not None:
                break
        return checked

    async def check_final(self, session: Any, turn: Any, text: str) -> Checked:
        checked = Checked(text, origin=origin_of(session, turn))
        for hook in self.hooks:
            checked = await hook.check_final(session, turn, checked)
            if checked.stop is not None:
                break
        return checked


Kind = Literal["before_model_call", "after_model_call", "before_tool_call", "after_tool_call", "on_event", "tool_output", "before_finish",
               "check_inbound", "check_final"]
