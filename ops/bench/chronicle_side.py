"""Chronicle on the workload: the real AgentLoop in-process, a real store, the instant provider."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any
from uuid import UUID

from workload import PROMPT, InstantProvider, toolbox

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.context import build_context
from chronicle.runtime.loop import AgentLoop, LoopOptions
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore


def store_for(backend: str, where: Path | None = None, pg: Any = None, schema: str | None = None) -> ChronicleStore:
    if backend == "sqlite":
        assert where is not None
        return ChronicleStore(f"sqlite:///{where / 'chronicle.db'}")
    assert pg is not None
    schema = schema or pg.new_schema()
    return ChronicleStore(f"{pg.base}?schema={schema}")


def prepare(store: ChronicleStore, steps: int, workspace: Path, session_id: UUID | None = None) -> tuple[AgentLoop, UUID]:
    """A loop with the instant provider and a session whose next input is the bench prompt."""
    spec = AgentSpec(name="main", provider="bench", model="bench-instant", tools=("lookup",), workspace=str(workspace))
    loop = loop_for(store, steps, workspace)
    if session_id is None:
        session, _ = start_session(store, spec, PROMPT)
        session_id = session.id
    else:
        submit_input(store, session_id, PROMPT)
    return loop, session_id


def loop_for(store: ChronicleStore, steps: int, workspace: Path) -> AgentLoop:
    """The loop alone, on `store` (a loop keeps the store it was built with: its I/O is bound then)."""
    return AgentLoop(store, InstantProvider(steps), toolbox(), workspace, options=LoopOptions(max_iterations=steps + 1))


def drive(loop: AgentLoop, session_id: UUID) -> float:
    """Run the queued turn to its end; seconds taken."""
    started = time.perf_counter()
    outcome = asyncio.run(loop.run_next(session_id))
    elapsed = time.perf_counter() - started
    if outcome is None or outcome.status != "completed":
        raise RuntimeError(f"chronicle bench turn did not complete: {outcome}")
    return elapsed


def run_turn(store: ChronicleStore, steps: int, workspace: Path, session_id: UUID | None = None) -> tuple[UUID, float]:
    """One turn of `steps` tool steps plus the final answer; returns (session, seconds)."""
    loop, session_id = prepare(store, steps, workspace, session_id)
    return session_id, drive(loop, session_id)


def message_bytes(store: ChronicleStore, session_id: UUID) -> int:
    """Bytes of the conversation itself, as the model reads it (compact JSON): the 'raw' size."""
    session = store.session(session_id)
    messages = build_context(store.head_turns(session))
    return len(json.dumps([m.wire() for m in messages], separators=(",", ":")).encode())
