"""LangGraph on the same workload: the prebuilt ToolNode + tools_condition graph over `add_messages`.

The model is a LangChain chat model (BaseChatModel subclass) that answers instantly with one
tool call per step, then a final answer, with the same texts as Chronicle's instant provider.
Two state shapes: the default (`add_messages`, the whole list checkpointed on every superstep)
and the beta `DeltaChannel` (only writes checkpointed, state rebuilt by replaying them).
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Iterator, TypedDict

from workload import FINAL, PROMPT, THOUGHT, TOOL_TEXT, tool_input

try:
    from langchain_core.language_models.chat_models import BaseChatModel
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langchain_core.outputs import ChatGeneration, ChatResult
    from langchain_core.tools import tool
    from langgraph.graph import START, StateGraph
    from langgraph.graph.message import add_messages
    from langgraph.prebuilt import ToolNode, tools_condition

    AVAILABLE = True
    MISSING = ""
except ImportError as exc:  # the bench group is not installed
    AVAILABLE = False
    MISSING = f"langgraph not installed ({exc}); run `make bench` (installs the bench group)"

try:
    from langgraph.channels.delta import DeltaChannel
    from langgraph.graph.message import _messages_delta_reducer

    DELTA = True
except ImportError:
    DELTA = False

if AVAILABLE:

    @tool
    def lookup(key: str) -> str:
        """Look a record up by key."""
        return TOOL_TEXT

    class InstantChatModel(BaseChatModel):
        """Answers at once: one tool call while the current turn (since the last user message) has fewer
        than `steps` AI messages, then the final text."""

        steps: int

        @property
        def _llm_type(self) -> str:
            return "bench-instant"

        def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
            since = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=-1)
            k = sum(1 for m in messages[since + 1:] if isinstance(m, AIMessage))
            if k < self.steps:
                message = AIMessage(
                    content=THOUGHT,
                    tool_calls=[{"name": "lookup", "args": tool_input(k), "id": f"toolu_{k:06d}", "type": "tool_call"}],
                )
            else:
                message = AIMessage(content=FINAL)
            return ChatResult(generations=[ChatGeneration(message=message)])

        def bind_tools(self, tools: Any, **kw: Any) -> "InstantChatModel":
            return self

    class DefaultState(TypedDict):
        messages: Annotated[list, add_messages]

    if DELTA:

        class DeltaState(TypedDict):
            messages: Annotated[list, DeltaChannel(_messages_delta_reducer)]

    def build_graph(steps: int, delta: bool, checkpointer: Any) -> Any:
        model = InstantChatModel(steps=steps).bind_tools([lookup])

        def agent(state: dict) -> dict:
            return {"messages": [model.invoke(state["messages"])]}

        graph = StateGraph(DeltaState if delta else DefaultState)
        graph.add_node("agent", agent)
        graph.add_node("tools", ToolNode([lookup]))
        graph.add_edge(START, "agent")
        graph.add_conditional_edges("agent", tools_condition)
        graph.add_edge("tools", "agent")
        return graph.compile(checkpointer=checkpointer)


@contextmanager
def saver(backend: str, where: Path | None = None, pg_url: str | None = None) -> Iterator[Any]:
    if backend == "sqlite":
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        assert where is not None
        conn = sqlite3.connect(str(where / "langgraph.db"), check_same_thread=False)
        try:
            s = SqliteSaver(conn)
            s.setup()
            yield s
        finally:
            conn.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        assert pg_url is not None
        with PostgresSaver.from_conn_string(pg_url) as s:
            s.setup()
            yield s


@contextmanager
def cold_saver(backend: str, where: Path | None = None, pg_url: str | None = None) -> Iterator[Any]:
    """A saver on a new connection to tables that already exist, as a new LangGraph process
    opens one: no `setup()`, whose statements would touch the checkpoint tables before the
    timed read (SQLite's saver runs its own set-up on first use, inside what is timed)."""
    if backend == "sqlite":
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        assert where is not None
        conn = sqlite3.connect(str(where / "langgraph.db"), check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        assert pg_url is not None
        with PostgresSaver.from_conn_string(pg_url) as s:
            yield s


def pg_url_for(base: str, schema: str) -> str:
    return f"{base}?options=-csearch_path%3D{schema}"


def run_thread(checkpointer: Any, steps: int, delta: bool, thread_id: str = "bench") -> tuple[float, Any, dict]:
    """One invoke of `steps` tool steps plus the final answer; returns (seconds, graph, config)."""
    graph = build_graph(steps, delta, checkpointer)
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 2 * steps + 10}
    started = time.perf_counter()
    result = graph.invoke({"messages": [("user", PROMPT)]}, config)
    elapsed = time.perf_counter() - started
    if result["messages"][-1].content != FINAL:
        raise RuntimeError("langgraph bench thread did not finish with the final answer")
    return elapsed, graph, config


def run_turns(checkpointer: Any, turns: int, delta: bool, thread_id: str = "bench") -> tuple[Any, dict, list[dict]]:
    """`turns` invokes of one tool step plus the final answer on one thread (untimed set-up).

    Returns (graph, config, the checkpoint config at the end of each turn)."""
    graph = build_graph(1, delta, checkpointer)
    config = {"configurable": {"thread_id": thread_id}, "recursion_limit": 20}
    ends = []
    for _ in range(turns):
        graph.invoke({"messages": [("user", PROMPT)]}, config)
        ends.append(graph.get_state(config).config)
    return graph, config, ends
