"""The loop's I/O bundle: what its collaborators may use, handed to each instead of the loop itself.

The model caller, tool runner, compactor, tools (through ToolContext) and child runners each
receive this bundle — store, provider, toolbox, workspace, options, clock, live events, hooks,
approver, the controls port and a way to spawn a child — and nothing with a back-reference to
the loop, so none of them can reach into the loop's private state or import it.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol
from uuid import UUID

from .clock import SYSTEM_CLOCK, Clock
from .hooks import Hooks
from .live import Broker
from .retry import RetryPolicy

if TYPE_CHECKING:
    from chronicle.domain.agent_spec import AgentSpec
    from chronicle.domain.tool_call import ToolCall

    from .providers.base import Provider
    from .store import ChronicleStore
    from .tools.base import Toolbox


@dataclass
class LoopOptions:
    max_iterations: int | None = None
    auto_approve: bool = False
    tool_timeout_s: float = 180.0
    #: Output tokens per model call; None: the application's default (CHRONICLE_MAX_TOKENS, else 8192).
    max_tokens: int | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy.from_env)
    #: Unused by the loop since a session's model is recorded (Session.ModelChanged, app/model_change.py): every
    #: request asks the session's recorded model. Kept so callers that set it still construct.
    model: str | None = None


class Steering(Protocol):
    """Read-only: the steering a port hands over is a value (a frozen dataclass in runtime/controls.py)."""

    @property
    def steer_ids(self) -> list[str]: ...

    @property
    def skip_unstarted(self) -> bool: ...

    def blocks(self) -> list[Any]: ...


class CancelWatch(Protocol):
    reason: str | None

    def start(self) -> None: ...

    async def stop(self) -> None: ...

    def honoured(self) -> None:
        """The turn's end for the cancel request is recorded: wake whoever waits for it."""


class ControlPort(Protocol):
    """How steering and cancel requests reach a running turn (recorded by other processes)."""

    def pending_steering(self, session_id: UUID, turn_id: UUID) -> Steering | None: ...

    def watch_cancel(self, session_id: UUID, turn_id: UUID, task: asyncio.Task, just_started: bool = False) -> CancelWatch:
        """`just_started`: the loop began this turn itself just now (not a turn found in flight), so
        no cancel can be waiting for it yet."""


class ChildRunner(Protocol):
    """A sub-agent's loop, as the delegate tool drives it; its hooks also check the report it hands back."""

    hooks: Hooks

    async def run_next(self, session_id: UUID) -> Any: ...

    async def emit(self, event: Any) -> None: ...


Approver = Callable[["ToolCall"], Awaitable[Any]]


@dataclass
class LoopIO:
    store: "ChronicleStore"
    provider: "Provider"
    toolbox: "Toolbox"
    workspace: Path
    options: LoopOptions
    controls: ControlPort
    clock: Clock = SYSTEM_CLOCK
    broker: Broker = field(default_factory=Broker)
    hooks: Hooks = field(default_factory=Hooks)
    approver: Approver | None = None
    #: A runtime.compaction.Compactor, or None for no automatic compaction.
    compactor: Any = None
    #: Builds a sub-agent's runner from its spec (set by the loop that owns this bundle).
    spawn: Callable[["AgentSpec"], ChildRunner] | None = None
    #: session id -> {"name", "prompt"}: a credential a tool asked for this turn (ToolContext.credential);
    #: the turn's end records it on the session (runtime/credentials.py), so its next message is the secret.
    credential_requests: dict[str, dict[str, str]] = field(default_factory=dict)

    async def emit(self, event: Any) -> None:
        await self.broker.emit(event)
        await self.hooks.on_event(event)

    def save(self, *aggregates: Any, rerunnable: bool = False) -> None:
        self.store.save(*aggregates, rerunnable=rerunnable)
