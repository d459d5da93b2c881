"""Hypothesis throws random command sequences at each aggregate: no illegal state is ever recorded.

After every command, the aggregate's recorded events are replayed from nothing; each status
change in that replay must be an edge of the kind's transition table.
"""

from __future__ import annotations

from uuid import uuid4

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from chronicle.domain.content import ModelResponse, TextBlock, ToolResultBlock, ToolUseBlock
from chronicle.domain.errors import DomainError
from chronicle.domain.session import SESSION_LIFECYCLE
from chronicle.domain.tool_call import TOOL_CALL_LIFECYCLE
from chronicle.domain.turn import TURN_LIFECYCLE

from .test_lifecycles import NOW, fire_tool_call, fire_turn, new_tool_call, new_turn


def replayed_statuses(events: list) -> list[str]:
    aggregate, statuses = None, []
    for event in events:
        aggregate = event.mutate(aggregate)
        statuses.append(aggregate.status)
    return statuses


def assert_legal(lifecycle, statuses: list[str]) -> None:
    legal = {(s, e.dest) for e in lifecycle.edges for s in e.sources}
    assert statuses[0] == lifecycle.initial
    for before, after in zip(statuses, statuses[1:], strict=False):
        assert after in lifecycle.states
        assert before == after or (before, after) in legal, f"illegal {before} -> {after} recorded"


class _Machine(RuleBasedStateMachine):
    lifecycle = TOOL_CALL_LIFECYCLE

    def __init__(self) -> None:
        super().__init__()
        self.events: list = []
        self.aggregate = self.make()

    def make(self):  # pragma: no cover - overridden
        raise NotImplementedError

    def attempt(self, command) -> None:
        version = self.aggregate.version
        try:
            command()
        except DomainError:
            assert self.aggregate.version == version, "a refused command recorded something"
        self.events.extend(self.aggregate.collect_events())

    @invariant()
    def only_legal_states_are_recorded(self) -> None:
        self.events.extend(self.aggregate.collect_events())
        assert_legal(self.lifecycle, replayed_statuses(self.events))


class ToolCallMachine(_Machine):
    lifecycle = TOOL_CALL_LIFECYCLE

    def make(self):
        return new_tool_call()

    @rule(trigger=st.sampled_from(sorted({e.trigger for e in TOOL_CALL_LIFECYCLE.edges})), idempotent=st.booleans())
    def command(self, trigger: str, idempotent: bool) -> None:
        self.aggregate.flags = {"idempotent": idempotent}
        self.attempt(lambda: fire_tool_call(self.aggregate, trigger))


class TurnMachine(_Machine):
    lifecycle = TURN_LIFECYCLE

    def make(self):
        return new_turn()

    @rule(trigger=st.sampled_from(sorted({e.trigger for e in TURN_LIFECYCLE.edges})))
    def command(self, trigger: str) -> None:
        self.attempt(lambda: fire_turn(self.aggregate, trigger))

    @rule(with_tool=st.booleans())
    def respond(self, with_tool: bool) -> None:
        content = [ToolUseBlock(id=f"tu{uuid4().hex[:4]}", name="x", input={})] if with_tool else [TextBlock(text="ok")]
        self.attempt(lambda: self.aggregate.record_response(ModelResponse(content=content, stop_reason="tool_use" if with_tool else "end_turn"), NOW))

    @rule()
    def answer(self) -> None:
        step = self.aggregate.open_step
        ids = [b["id"] for b in step["response"]["content"]] if step else ["none"]
        self.attempt(lambda: self.aggregate.record_tool_results([ToolResultBlock(tool_use_id=i, content="r") for i in ids], NOW))


class SessionMachine(_Machine):
    lifecycle = SESSION_LIFECYCLE

    def make(self):
        from chronicle.domain.agent_spec import AgentSpec
        from chronicle.domain.session import Session

        return Session.start(uuid4(), AgentSpec(), NOW)

    @rule(text=st.text(min_size=1, max_size=5))
    def queue(self, text: str) -> None:
        self.attempt(lambda: self.aggregate.queue_input(uuid4().hex, text, NOW))

    @rule()
    def start(self) -> None:
        self.attempt(lambda: self.aggregate.start_turn(uuid4(), NOW))

    @rule()
    def end(self) -> None:
        self.attempt(lambda: self.aggregate.end_turn(self.aggregate.active_turn_id or uuid4(), NOW))

    @rule(count=st.integers(min_value=0, max_value=3))
    def undo(self, count: int) -> None:
        self.attempt(lambda: self.aggregate.undo(count, NOW))

    @rule()
    def redo(self) -> None:
        self.attempt(lambda: self.aggregate.redo(NOW))

    @invariant()
    def head_only_holds_recorded_turns(self) -> None:
        assert set(self.aggregate.head) <= set(self.aggregate.turns)


fast = settings(max_examples=40, stateful_step_count=25, deadline=None)
TestToolCallLifecycle = ToolCallMachine.TestCase
TestToolCallLifecycle.settings = fast
TestTurnLifecycle = TurnMachine.TestCase
TestTurnLifecycle.settings = fast
TestSessionLifecycle = SessionMachine.TestCase
TestSessionLifecycle.settings = fast
