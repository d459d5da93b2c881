"""The loop with its controls, on both backends: doom loop in chat, prompt-too-long, steering requeue."""

from __future__ import annotations

import asyncio

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.content import ModelResponse, ProviderError, TextBlock, ToolUseBlock
from chronicle.runtime.compaction import Compactor
from chronicle.runtime.controls import steer
from chronicle.runtime.guards import guard_hooks
from chronicle.runtime.hooks import Hooks
from chronicle.runtime.loop import AgentLoop
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.toolsets import toolbox_for


class ListProvider:
    """Answers from a list in call order; summaries get a fixed text."""

    name = "list"

    def __init__(self, responses: list[ModelResponse]) -> None:
        self.responses = list(responses)
        self.requests: list = []

    async def stream(self, request, on_delta):
        self.requests.append(request)
        if request.auxiliary == "summary":
            return ModelResponse(content=[TextBlock(text="short summary")])
        return self.responses.pop(0)


def read_hello(i: int) -> ModelResponse:
    return ModelResponse(content=[ToolUseBlock(id=f"tu_{i}", name="read_file", input={"path": "hello.txt"})], stop_reason="tool_use")


def make_loop(db_url, workspace, provider, **kwargs) -> tuple[AgentLoop, ChronicleStore]:
    store = ChronicleStore(db_url)
    loop = AgentLoop(store, provider, toolbox_for(["read_file"]), workspace, **kwargs)
    return loop, store


def test_the_doom_loop_asks_a_person_in_chat_and_goes_on_when_approved(db_url, workspace):
    provider = ListProvider([read_hello(1), read_hello(2), read_hello(3), ModelResponse(content=[TextBlock(text="done")])])
    asked = []

    async def approver(call):
        asked.append(call.tool_use_id)
        return "approve"

    loop, store = make_loop(db_url, workspace, provider, approver=approver)
    loop.hooks = Hooks(guard_hooks(None, interactive=True))
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "go")
    outcome = asyncio.run(loop.run_next(session.id))
    assert outcome.status == "completed"
    assert asked == ["tu_3"]


def test_prompt_too_long_compacts_older_turns_and_retries_the_call_once(db_url, workspace):
    too_long = ModelResponse(stop_reason="error", error=ProviderError(kind="prompt_too_long", message="prompt is too long"))
    provider = ListProvider([
        ModelResponse(content=[TextBlock(text="one")]), ModelResponse(content=[TextBlock(text="two")]),
        too_long, ModelResponse(content=[TextBlock(text="three")]),
    ])
    loop, store = make_loop(db_url, workspace, provider, compactor=Compactor())
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "first")
    asyncio.run(loop.run_next(session.id))
    for prompt in ("second", "third"):
        submit_input(store, session.id, prompt)
        outcome = asyncio.run(loop.run_next(session.id))
    assert outcome.status == "completed" and outcome.text == "three"
    record = store.session(session.id)
    summary, view = record.context_view()
    assert summary == "short summary" and len(view) == 1 and len(record.head) == 3
    turn = store.turn(record.head[-1])
    assert [r["reason"].split(":")[0] for r in turn.retries] == ["prompt_too_long"]
    retried = provider.requests[-1]
    assert "short summary" in retried.messages[0].content[0].text


def test_steering_that_no_safe_point_delivered_becomes_the_next_input(db_url, workspace):
    started = asyncio.Event()

    class SlowProvider(ListProvider):
        async def stream(self, request, on_delta):
            started.set()
            await asyncio.sleep(0.3)
            return await super().stream(request, on_delta)

    provider = SlowProvider([ModelResponse(content=[TextBlock(text="first answer")]), ModelResponse(content=[TextBlock(text="steered")])])
    loop, store = make_loop(db_url, workspace, provider)
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "go")

    async def scenario():
        running = asyncio.ensure_future(loop.run_next(session.id))
        await started.wait()
        result = steer(store, session.id, "also this")
        first = await running
        second = await loop.run_next(session.id)
        return result, first, second

    result, first, second = asyncio.run(scenario())
    assert result.outcome == "steering"
    assert first.text == "first answer" and second.text == "steered"
    assert store.turn(second.turn_id).input_text == "also this"
    assert store.session(session.id).steering == []


def test_always_covers_the_same_tool_in_later_steps_of_the_same_turn(db_url, workspace):
    def bash(i: int) -> ModelResponse:
        return ModelResponse(content=[ToolUseBlock(id=f"b{i}", name="bash", input={"command": f"echo {i}"})], stop_reason="tool_use")

    provider = ListProvider([bash(1), bash(2), ModelResponse(content=[TextBlock(text="done")])])
    asked = []

    async def approver(call):
        asked.append(call.tool_use_id)
        return "always"

    store = ChronicleStore(db_url)
    loop = AgentLoop(store, provider, toolbox_for(["bash"]), workspace, approver=approver)
    session, _ = start_session(store, AgentSpec(tools=("bash",)), "go")
    assert asyncio.run(loop.run_next(session.id)).status == "completed"
    assert asked == ["b1"]
    assert store.session(session.id).always_allowed == ["bash"]


def test_progress_counts_the_tools_that_ran_and_apart_from_them_the_ones_skipped(db_url, workspace):
    """A hook skips the second read of each step: progress (live and in chat's /progress) counts one
    call run and one skipped per step, not two run."""
    from chronicle.runtime.cli.chat_slash import progress
    from chronicle.runtime.hooks import Hook, Skip
    from chronicle.runtime.live import Broker, ProgressEvent

    def two_reads(i: int) -> ModelResponse:
        return ModelResponse(content=[ToolUseBlock(id=f"a{i}", name="read_file", input={"path": "hello.txt"}),
                                      ToolUseBlock(id=f"b{i}", name="read_file", input={"path": "hello.txt"})], stop_reason="tool_use")

    class SkipB(Hook):
        async def before_tool_call(self, session, turn, call):
            return Skip("not this one") if call.tool_use_id.startswith("b") else None

    provider = ListProvider([two_reads(1), two_reads(2), ModelResponse(content=[TextBlock(text="done")])])
    broker, seen = Broker(), []
    broker.subscribe(lambda e: seen.append(e) if isinstance(e, ProgressEvent) else None)
    loop, store = make_loop(db_url, workspace, provider, broker=broker, hooks=Hooks([SkipB()]))
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "go")
    assert asyncio.run(loop.run_next(session.id)).status == "completed"
    assert [(p.iteration, p.tools_run) for p in seen] == [(1, 0), (2, 1), (3, 2)]
    assert [p.tools_skipped for p in seen] == [0, 1, 2]

    class Console:
        def __init__(self):
            self.lines = []

        def print(self, text):
            self.lines.append(text)

    chat = type("Chat", (), {"store": ChronicleStore(db_url), "session_id": session.id, "console": Console()})()
    progress(chat, "")
    assert "2 tool call(s) run, 2 skipped" in chat.console.lines[0]
