"""The real loop around a real provider SDK talking to a loopback server: one harness for every provider's loop tests.

Each provider's tests differ in the wire they script, not in how a session is started, run,
cancelled mid-stream or read back; keeping that here means a change to the loop's seams is
made once for the Anthropic and the OpenAI-compatible suites alike.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Callable

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.live import Broker
from chronicle.runtime.loop import AgentLoop, LoopOptions
from chronicle.runtime.retry import RetryPolicy
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.tools import DEFAULT_TOOLS
from chronicle.runtime.toolsets import toolbox_for
from tests.closed_at_end import closed_at_end


class LoopHarness:
    """One store, one provider, the default tools and a broker whose live events are kept in `events`."""

    def __init__(self, db_url: str, workspace: Path, provider: Any, provider_name: str, model: str,
                 max_attempts: int = 8, on_event: Callable[[Any], None] | None = None, cap_s: float = 0.05) -> None:
        self.store = closed_at_end(ChronicleStore(db_url))  # the harness's store lives as long as the test
        self.events: list[Any] = []
        broker = Broker()
        broker.subscribe(self.events.append)
        if on_event:
            broker.subscribe(on_event)
        self.provider = provider
        options = LoopOptions(retry=RetryPolicy(max_attempts=max_attempts, base_s=0.01, cap_s=cap_s))
        self.loop = AgentLoop(self.store, provider, toolbox_for(DEFAULT_TOOLS), workspace, broker=broker, options=options)
        self.spec = AgentSpec(name="main", provider=provider_name, model=model, tools=DEFAULT_TOOLS,
                              instructions="You are careful.", workspace=str(workspace))

    async def run_async(self, prompt: str, attachments: list[dict[str, Any]] | None = None) -> Any:
        session, _ = start_session(self.store, self.spec, prompt, attachments=attachments)
        self.session_id = session.id
        return await self.loop.run_next(session.id)

    def run(self, prompt: str, attachments: list[dict[str, Any]] | None = None) -> Any:
        return asyncio.run(self.run_async(prompt, attachments))

    def turn(self) -> Any:
        return self.store.turn(self.store.session(self.session_id).turns[-1])


def run_cancelled_when(make_harness: Callable[..., LoopHarness], prompt: str, when: Callable[[Any], bool],
                       timeout: float = 20) -> tuple[LoopHarness, Any]:
    """Run one turn and cancel its task from inside the loop at the first live event `when` accepts,
    the way Ctrl-C reaches a running turn; returns the harness and the turn's outcome."""

    async def scenario() -> tuple[LoopHarness, Any]:
        task: asyncio.Task[Any] | None = None

        def cancel(event: Any) -> None:
            if task is not None and when(event):
                task.cancel()

        harness = make_harness(on_event=cancel)
        task = asyncio.ensure_future(harness.run_async(prompt))
        return harness, await task

    return asyncio.run(asyncio.wait_for(scenario(), timeout=timeout))


def first_text(event: Any) -> bool:
    return bool(event.type == "message_update" and event.delta.get("type") == "text")
