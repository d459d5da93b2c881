"""Starting or continuing a session for the public API, through the runtime functions `chronicle run` uses.

`prepare` does what `run` does before its first turn (a spec from the Agent, the loop from the
one factory, the prompt recorded durably) and `drive` runs the session's turns. Any setup
failure raises ChronicleError before anything is recorded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from uuid import UUID

from chronicle.runtime.app.loops import LoopSetupError, build_loop
from chronicle.runtime.app.running import drive_session
from chronicle.runtime.app.specs import normalise_provider
from chronicle.runtime.attachments import AttachmentError, store_attachments
from chronicle.runtime.live import Broker
from chronicle.runtime.loop import AgentLoop, LoopOptions, TurnOutcome
from chronicle.runtime.providers import default_model, default_provider_name
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore

from .agent import Agent
from .errors import ChronicleError


def workspace_of(workspace: str | Path | None, recorded: str = "") -> Path:
    path = Path(workspace or recorded or Path.cwd()).expanduser().resolve()
    if not path.is_dir():
        raise ChronicleError(f"workspace {path} is not a directory; pass an existing one", 2)
    return path


def prepare(store: ChronicleStore, agent: Agent, prompt: str, session_id: UUID | None, workspace: str | Path | None,
            broker: Broker, options: LoopOptions, attachments: Sequence[Any] | None = None) -> tuple[AgentLoop, UUID]:
    if not isinstance(agent, Agent):
        raise TypeError(f"expected an Agent, got {type(agent).__name__}")
    if not prompt.strip():
        raise ChronicleError("the prompt is empty; say what the agent should do", 2)
    if session_id is not None:
        spec = store.session(session_id).spec
        ws = workspace_of(workspace, spec.workspace if spec.workspace and Path(spec.workspace).is_dir() else "")
        loop = _loop(store, spec, broker, options, ws, provider=normalise_provider(agent.provider), model=agent.model)
        submit_input(store, session_id, prompt, attachments=_stored(store, attachments))
        return loop, session_id
    ws = workspace_of(workspace)
    provider = normalise_provider(agent.provider) or default_provider_name() or ""
    model = agent.model or ("scripted" if provider.startswith("scripted:") else default_model())
    spec = agent.spec(provider=provider, model=model, workspace=str(ws), max_iterations=options.max_iterations)
    loop = _loop(store, spec, broker, options, ws)
    created, _ = start_session(store, spec, prompt, attachments=_stored(store, attachments))
    return loop, created.id


def _loop(store: ChronicleStore, target: Any, broker: Broker, options: LoopOptions, workspace: Path,
          provider: str | None = None, model: str | None = None) -> AgentLoop:
    try:
        return build_loop(store, target, provider_name=provider, model=model, workspace=workspace, options=options, broker=broker)
    except LoopSetupError as exc:
        raise ChronicleError(str(exc), 2) from None


def _stored(store: ChronicleStore, attachments: Sequence[Any] | None) -> list[dict[str, Any]] | None:
    try:
        return store_attachments(store, attachments) or None
    except AttachmentError as exc:
        raise ChronicleError(str(exc), 2) from None


async def drive(loop: AgentLoop, session_id: UUID) -> TurnOutcome | None:
    return await drive_session(loop, session_id)
