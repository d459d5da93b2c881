"""A mixed run for projection tests: many sessions, sub-agent sessions (two levels) and errors.

Every session is driven by the real loop over the real store with a scripted provider;
sub-agent sessions are created the way the sub-agent runtime creates them
(`Session.start(parent_session_id=..., parent_tool_call_id=...)`).
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Callable
from uuid import UUID, uuid4

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.ids import task_id, tool_call_id
from chronicle.domain.repair import Repair
from chronicle.domain.routine_run import RoutineRun
from chronicle.domain.session import Session
from chronicle.domain.task_board import DelegatedTask
from chronicle.runtime.loop import AgentLoop, LoopOptions
from chronicle.runtime.providers.scripted import ScriptedProvider
from chronicle.runtime.retry import RetryPolicy
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.tools import DEFAULT_TOOLS
from chronicle.runtime.toolsets import toolbox_for
from tests.helpers import text, tool_use


class StepClock:
    """Each reading one second later, starting on a fixed day: days and times are deterministic."""

    def __init__(self, start: datetime = datetime(2026, 3, 1, 23, 59, 0, tzinfo=timezone.utc)) -> None:
        self.t = start

    def now(self) -> datetime:
        self.t += timedelta(seconds=1)
        return self.t


def usage(i: int, o: int, cw: int = 0, cr: int = 0) -> dict[str, int]:
    return {"input_tokens": i, "output_tokens": o, "cache_creation_input_tokens": cw, "cache_read_input_tokens": cr}


def reply(*blocks: dict[str, Any], u: dict[str, int], stop: str | None = None) -> dict[str, Any]:
    has_tools = any(b["type"] == "tool_use" for b in blocks)
    return {"content": list(blocks), "stop_reason": stop or ("tool_use" if has_tools else "end_turn"), "usage": u}


ERROR = {"content": [], "stop_reason": "end_turn", "usage": usage(0, 0),
         "error": {"kind": "overloaded_error", "message": "Overloaded", "status": 529, "retryable": True}}
FATAL = {"content": [], "stop_reason": "end_turn", "usage": usage(0, 0),
         "error": {"kind": "invalid_request_error", "message": "bad request", "status": 400, "retryable": False}}

SCRIPTS: dict[str, list[Any]] = {
    "tools": [reply(text("Looking."), tool_use("tu_1", "read_file", path="hello.txt"), tool_use("tu_2", "list_dir", path="."),
                    u=usage(1000, 200, cw=300, cr=400)),
              reply(tool_use("tu_3", "read_file", file="x"), tool_use("tu_4", "nonexistent_tool"), u=usage(1200, 50, cr=700)),
              reply(text("Done."), u=usage(1300, 30, cr=900))],
    "plain": [reply(text("Hi."), u=usage(50, 5))],
    "retry_then_fail": [ERROR],
    "fatal": [FATAL],
    "approval": [reply(tool_use("tu_1", "bash", command="echo hi"), u=usage(80, 12)), reply(text("ok"), u=usage(90, 3))],
    "write": [reply(tool_use("tu_1", "write_file", path="out.txt", content="x"), u=usage(70, 9)), reply(text("Wrote."), u=usage(75, 4))],
    # A refused turn: left out of what the model reads, so the history projection marks it (proj_history_marks).
    "refusal": [reply(text("I can't help with that."), u=usage(40, 6), stop="refusal")],
}


class MixedRun:
    def __init__(self, store: ChronicleStore, tmp: Path, workspace: Path, after_each: Callable[[], None] = lambda: None) -> None:
        self.store, self.tmp, self.workspace, self.after_each = store, tmp, workspace, after_each
        self.clock = StepClock()
        self.sessions: dict[str, UUID] = {}

    def provider(self, key: str, agent: str) -> ScriptedProvider:
        path = self.tmp / f"script-{key}-{agent}.json"
        path.write_text(json.dumps({"agents": {agent: SCRIPTS[key]}, "title": [f"Title for {key}"]}), encoding="utf-8")
        return ScriptedProvider(path)

    async def session(self, label: str, key: str, prompts: list[str], *, agent: str = "main", model: str = "claude-sonnet-4-5",
                      parent: str | None = None, parent_call: UUID | None = None, auto_approve: bool = True) -> UUID:
        sid = uuid4()
        now = self.clock.now()
        spec = AgentSpec(name=agent, model=model, tools=DEFAULT_TOOLS, workspace=str(self.workspace))
        session = Session.start(sid, spec, now, parent_session_id=self.sessions[parent] if parent else None, parent_tool_call_id=parent_call)
        for i, prompt in enumerate(prompts):
            session.queue_input(f"in{i}", prompt, now)
        self.store.create_session(session)
        self.sessions[label] = sid
        options = LoopOptions(auto_approve=auto_approve, retry=RetryPolicy(max_attempts=3, base_s=0.0, cap_s=0.0, jitter=0.0))
        loop = AgentLoop(self.store, self.provider(key, agent), toolbox_for(DEFAULT_TOOLS), self.workspace, options=options, clock=self.clock)
        self._hooks(loop)
        while True:
            outcome = await loop.run_next(sid)
            self.after_each()
            if outcome is None or outcome.status == "awaiting_approval":
                return sid

    def _hooks(self, loop: AgentLoop) -> None:
        """Room for tests to add hooks to every loop (the title hook, for instance)."""

    def _task_board(self, parent: str, children: list[str]) -> None:
        """The parent's delegated tasks as the delegate tool records them: one completed, one failed with its reflection."""
        for index, label in enumerate(children):
            child = self.store.session(self.sessions[label])
            task = DelegatedTask(
                id=task_id(child.id), parent_session_id=self.sessions[parent], parent_tool_call_id=self.first_call(parent),
                child_session_id=child.id, index=index, agent=child.spec.name, task=f"task for {label}", timestamp=self.clock.now(),
            )
            task.claim(child.spec.name, self.clock.now())
            if index == 0:
                task.complete("done", self.clock.now())
            else:
                task.fail("it broke", self.clock.now())
                task.reflect("turn failed after 1 model call(s)", "it broke", self.clock.now())
            self.store.save(task)

    def _routine_runs(self, label: str) -> None:
        """A routine run that completed (on session `label`) and one a guardrail skipped."""
        for due, skipped in (("cron/1", False), ("cron/2", True)):
            run = RoutineRun(id=uuid4(), routine="todo", scope=str(self.workspace), trigger="cron:* * * * *", due=due,
                             action="lightweight", holder="w1", session_id=None if skipped else self.sessions[label],
                             input_id=None if skipped else "in0", timestamp=self.clock.now())
            if skipped:
                run.skip("cooldown", self.clock.now())
            else:
                run.complete("all good", 0.01, self.clock.now())
            self.store.save(run)

    def first_call(self, label: str) -> UUID:
        sid = self.sessions[label]
        first = self.store.session(sid).turns[0]
        turn = self.store.turn(first)
        block = next(b for s in turn.steps for b in s["response"]["content"] if b.get("type") == "tool_use")
        return tool_call_id(turn.id, turn.steps[0]["step"], block["id"])

    async def run(self) -> None:
        await self.session("a", "tools", ["look around", "again please"])
        await self.session("b", "plain", ["hello"])
        await self.session("a1", "plain", ["sub task"], agent="helper", model="claude-haiku-4-5", parent="a", parent_call=self.first_call("a"))
        await self.session("a2", "write", ["write it"], agent="writer", model="claude-haiku-4-5", parent="a", parent_call=self.first_call("a"))
        await self.session("a2x", "plain", ["grandchild"], agent="helper", model="claude-haiku-4-5", parent="a2",
                           parent_call=self.first_call("a2"))
        self._task_board("a", ["a1", "a2"])
        self._routine_runs("b")
        repair = Repair(id=uuid4(), kind="stuck_turn", target=str(self.store.session(self.sessions["b"]).turns[0]),
                        session_id=self.sessions["b"], detail="silent for 700 s", timestamp=self.clock.now())
        repair.attempt("retry", "marked interrupted", self.clock.now())
        repair.attempt("success", "moved again", self.clock.now())
        self.store.save(repair)
        await self.session("c", "retry_then_fail", ["this fails"])
        await self.session("d", "fatal", ["this fails at once"])
        await self.session("e", "approval", ["shell"], auto_approve=False)
        await self.session("f", "plain", ["unpriced"], model="scripted")
        await self.session("g", "refusal", ["something it refuses", "then this"])
        b = self.store.session(self.sessions["b"])
        b.undo(1, self.clock.now())
        self.store.save(b)
        b = self.store.session(self.sessions["b"])
        b.redo(self.clock.now())
        self.store.save(b)
        self.after_each()

