"""`Chronicle`: one event store, and every use case the CLI offers, as methods.

Each method hands over to the function the CLI command calls and returns what its `--json`
prints (dicts, lists of dicts), so a program and a person at a terminal see the same facts.
Failures the CLI would report with an exit code raise `ChronicleError` with that code.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from uuid import UUID

from chronicle.runtime.config import resolve_db_url
from chronicle.runtime.live import Broker
from chronicle.runtime.loop import AgentLoop, LoopOptions, TurnOutcome
from chronicle.runtime.store import ChronicleStore, NotFound

from . import runs
from .agent import Agent
from .errors import ChronicleError


@dataclass(frozen=True)
class RunResult:
    """How a run ended, as `chronicle run` reports it (status and exit code alike)."""

    session_id: str
    status: str
    text: str
    exit_code: int
    reason: str | None = None
    turn_id: str | None = None

    @classmethod
    def of(cls, session_id: UUID, outcome: TurnOutcome | None) -> RunResult:
        if outcome is None:
            return cls(str(session_id), "idle", "", 0)
        return cls(str(session_id), outcome.status, outcome.text, outcome.exit_code, outcome.reason,
                   str(outcome.turn_id) if outcome.turn_id else None)


class Chronicle:
    """An event store (SQLite file or PostgreSQL) and the agents' sessions in it.

    `Chronicle()` uses CHRONICLE_DB, else the default SQLite file under ./.chronicle/, as the CLI does.
    """

    def __init__(self, url: str | None = None) -> None:
        self.url = resolve_db_url(url)
        self._store: ChronicleStore | None = None

    @property
    def store(self) -> ChronicleStore:
        if self._store is None:
            try:
                self._store = ChronicleStore(self.url)
            except ValueError as exc:
                raise ChronicleError(str(exc), 2) from None
        return self._store

    def close(self) -> None:
        if self._store is not None:
            self._store.close()
            self._store = None

    def __enter__(self) -> Chronicle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def session_id(self, ref: str | UUID) -> UUID:
        if isinstance(ref, UUID):
            return ref
        try:
            return self.store.resolve_session_id(ref)
        except NotFound as exc:
            raise ChronicleError(str(exc), 2) from None

    # -- running agents ------------------------------------------------------------------------

    def _prepare(self, agent: Agent, prompt: str, session: str | None, workspace: str | Path | None,
                 attachments: Sequence[Any] | None, auto_approve: bool, max_iterations: int | None,
                 broker: Broker) -> tuple[AgentLoop, UUID]:
        sid = self.session_id(session) if session else None
        return runs.prepare(
            self.store, agent, prompt, sid, workspace, broker,
            LoopOptions(max_iterations=max_iterations, auto_approve=auto_approve), attachments=attachments,
        )

    async def run(self, agent: Agent, prompt: str, *, session: str | None = None, workspace: str | Path | None = None,
                  attachments: Sequence[Any] | None = None, auto_approve: bool = False,
                  max_iterations: int | None = None) -> RunResult:
        """Record the prompt and run the agent until the turn ends, pauses or fails (async `run_sync`)."""
        loop, sid = self._prepare(agent, prompt, session, workspace, attachments, auto_approve, max_iterations, Broker())
        outcome = await runs.drive(loop, sid)
        return RunResult.of(sid, outcome)

    def run_sync(self, agent: Agent, prompt: str, *, session: str | None = None, workspace: str | Path | None = None,
                 attachments: Sequence[Any] | None = None, auto_approve: bool = False,
                 max_iterations: int | None = None) -> RunResult:
        """`chronicle run PROMPT` from code: blocks until the turn completes, fails, stops or waits for approval."""
        return asyncio.run(self.run(agent, prompt, session=session, workspace=workspace, attachments=attachments,
                                    auto_approve=auto_approve, max_iterations=max_iterations))

    async def stream(self, agent: Agent, prompt: str, *, session: str | None = None, workspace: str | Path | None = None,
                     attachments: Sequence[Any] | None = None, auto_approve: bool = False,
                     max_iterations: int | None = None) -> AsyncIterator[Any]:
        """The live events of `run --json`, as pydantic models (`event.model_dump()` is the JSON line)."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        broker = Broker()
        broker.subscribe(queue.put_nowait)
        loop, sid = self._prepare(agent, prompt, session, workspace, attachments, auto_approve, max_iterations, broker)
        task = asyncio.ensure_future(runs.drive(loop, sid))
        try:
            while not (task.done() and queue.empty()):
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
            task.result()
        finally:
            if not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
