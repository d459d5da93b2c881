"""Drive the real loop in-process against a real store with a scripted provider."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.live import Broker
from chronicle.runtime.loop import AgentLoop, LoopOptions, TurnOutcome
from chronicle.runtime.providers.scripted import ScriptedProvider
from chronicle.runtime.retry import RetryPolicy
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.tools import DEFAULT_TOOLS
from chronicle.runtime.toolsets import toolbox_for
from tests.closed_at_end import closed_at_end


class RecordingProvider(ScriptedProvider):
    """The scripted provider, remembering every request it answered."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.requests: list[Any] = []

    async def stream(self, request, on_delta):  # type: ignore[no-untyped-def]
        self.requests.append(request)
        return await super().stream(request, on_delta)


class Harness:
    def __init__(self, db_url: str, workspace: Path, script_dir: Path, main: list[Any], tools: tuple[str, ...] = DEFAULT_TOOLS,
                 **options: Any) -> None:
        self.store = closed_at_end(ChronicleStore(db_url))  # the harness's store lives as long as the test
        path = script_dir / "script.json"
        path.write_text(json.dumps({"agents": {"main": main}}), encoding="utf-8")
        self.provider = RecordingProvider(path)
        self.events: list[Any] = []
        broker = Broker()
        broker.subscribe(self.events.append)
        options.setdefault("retry", RetryPolicy(base_s=0.001, cap_s=0.01))
        self.loop = AgentLoop(self.store, self.provider, toolbox_for(tools), workspace, broker=broker, options=LoopOptions(**options))
        self.spec = AgentSpec(name="main", provider=f"scripted:{path}", model="scripted", tools=tools, workspace=str(workspace))
        self.session_id = None

    def run(self, prompt: str) -> TurnOutcome:
        if self.session_id is None:
            session, _ = start_session(self.store, self.spec, prompt)
            self.session_id = session.id
        else:
            submit_input(self.store, self.session_id, prompt)
        outcome = asyncio.run(self.loop.run_next(self.session_id))
        assert outcome is not None
        return outcome

    def results(self) -> list[Any]:
        """Every tool_result block the model will see, in order."""
        from chronicle.domain.context import build_context

        session = self.store.session(self.session_id)
        return [b for m in build_context(self.store.head_turns(session)) for b in m.content if b.type == "tool_result"]
