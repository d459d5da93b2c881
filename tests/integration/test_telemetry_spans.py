"""GenAI spans derived from the log: live at each turn's end and again by export, identical, across a
delegation and an approval resume, on SQLite and PostgreSQL; retries as span events."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.ids import tool_call_id
from chronicle.runtime.agents.registry import AgentRegistry
from chronicle.runtime.clock import SYSTEM_CLOCK
from chronicle.runtime.loop import AgentLoop, LoopOptions
from chronicle.runtime.providers import ScriptedProvider
from chronicle.runtime.providers.openai_compat import OpenAICompatProvider
from chronicle.runtime.retry import RetryPolicy
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.telemetry.derive import derive_turn_spans
from chronicle.runtime.telemetry.export import ExporterSink, TraceHook
from chronicle.runtime.telemetry.records import session_logs
from chronicle.runtime.tools import DEFAULT_TOOLS, READ_ONLY_TOOLS
from chronicle.runtime.toolsets import toolbox_for
from tests.chat_sse_server import chat_reply, chat_sse  # noqa: F401
from tests.helpers import response, text, tool_use
from tests.sse_server import HttpError, sse  # noqa: F401

RESEARCHER = AgentSpec(name="researcher", description="reads files", tools=READ_ONLY_TOOLS)


def traced_loop(
    store: ChronicleStore, provider: Any, tools: tuple[str, ...], workspace, exporter: InMemorySpanExporter, **options: Any
):
    loop = AgentLoop(store, provider, toolbox_for(tools), workspace, options=LoopOptions(**options))
    loop.hooks.add(TraceHook(store, ExporterSink(exporter)))
    return loop


def by_name(spans: list[Any]) -> dict[str, list[Any]]:
    found: dict[str, list[Any]] = {}
    for span in spans:
        found.setdefault(span.name, []).append(span)
    return found


def comparable(span: Any) -> tuple:
    parent = span.parent.span_id if span.parent else None
    return (
        span.name,
        span.context.trace_id,
        span.context.span_id,
        parent,
        span.start_time,
        span.end_time,
        json.dumps(dict(span.attributes), sort_keys=True, default=str),
        tuple(e.name for e in span.events),
    )


def test_a_delegation_and_an_approval_resume_give_one_trace_nested_as_the_work_was(db_url, workspace, tmp_path):
    path = tmp_path / "script.json"
    path.write_text(
        json.dumps(
            {
                "agents": {
                    "main": [
                        response(tool_use("d1", "delegate", tasks=[{"agent": "researcher", "task": "look"}]), usage=(100, 10)),
                        response(tool_use("b1", "bash", command="echo hi"), usage=(120, 12)),
                        response(text("all done"), usage=(130, 13)),
                    ],
                    "researcher": [response(tool_use("r1", "read_file", path="hello.txt")), response(text("found hello"))],
                }
            }
        ),
        encoding="utf-8",
    )
    store = ChronicleStore(db_url)
    registry = AgentRegistry(main=AgentSpec(name="main", tools=(*DEFAULT_TOOLS, "delegate"), max_depth=1), agents=(RESEARCHER,))
    spec = registry.main_spec(f"scripted:{path}", "scripted", str(workspace))
    exporter = InMemorySpanExporter()
    session, _ = start_session(store, spec, "go")

    first = asyncio.run(traced_loop(store, ScriptedProvider(path), spec.tools, workspace, exporter).run_next(session.id))
    assert first is not None and first.status == "awaiting_approval"
    live_before_resume = exporter.get_finished_spans()
    assert {s.name for s in live_before_resume} == {"invoke_agent researcher", "chat scripted", "execute_tool read_file"}, (
        "only the finished child turn is traced while the parent waits"
    )

    turn = store.turn(store.session(session.id).turns[0])
    bash = store.tool_call(tool_call_id(turn.id, 1, "b1"))
    bash.approve(SYSTEM_CLOCK.now(), by="tester")
    store.save(bash)
    resumed = asyncio.run(traced_loop(store, ScriptedProvider(path), spec.tools, workspace, exporter).run_next(session.id))
    assert resumed is not None and resumed.status == "completed"

    spans = list(exporter.get_finished_spans())
    names = by_name(spans)
    main, child = names["invoke_agent main"][0], names["invoke_agent researcher"][0]
    delegate, bash_span = names["execute_tool delegate"][0], names["execute_tool bash"][0]
    assert main.parent is None and {s.context.trace_id for s in spans} == {turn.id.int}
    assert child.parent.span_id == delegate.context.span_id, "the sub-agent sits under the delegating tool call"
    assert delegate.parent.span_id == main.context.span_id and bash_span.parent.span_id == main.context.span_id
    chats = sorted(names["chat scripted"], key=lambda s: s.start_time)
    assert [c.parent.span_id for c in chats].count(main.context.span_id) == 3
    assert [c.parent.span_id for c in chats].count(child.context.span_id) == 2
    assert names["execute_tool read_file"][0].parent.span_id == child.context.span_id

    assert main.attributes["gen_ai.operation.name"] == "invoke_agent" and main.attributes["gen_ai.agent.name"] == "main"
    assert main.attributes["gen_ai.conversation.id"] == str(session.id)
    assert child.attributes["gen_ai.conversation.id"] != str(session.id)
    assert main.attributes["chronicle.turn.status"] == "completed" and main.attributes["gen_ai.usage.input_tokens"] == 350
    assert [e.name for e in main.events] == ["chronicle.turn.approvalrequested", "chronicle.turn.resumed"]
    assert [e.name for e in bash_span.events] == ["chronicle.approval.approvalrequested", "chronicle.approval.approved"]
    assert bash_span.events[1].attributes["chronicle.by"] == "tester"
    assert bash_span.attributes["gen_ai.tool.call.id"] == "b1" and bash_span.attributes["gen_ai.tool.name"] == "bash"
    main_chats = [c for c in chats if c.parent.span_id == main.context.span_id]
    assert main_chats[0].attributes["gen_ai.usage.input_tokens"] == 100
    assert list(main_chats[0].attributes["gen_ai.response.finish_reasons"]) == ["tool_use"]
    assert list(main_chats[-1].attributes["gen_ai.response.finish_reasons"]) == ["end_turn"]
    assert all("gen_ai.input.messages" not in s.attributes and "gen_ai.tool.call.arguments" not in s.attributes for s in spans), (
        "content only when asked for"
    )
    for span in spans:
        assert span.start_time <= span.end_time

    # The log gives the same spans, span for span, as were sent live.
    derived = [s for log in session_logs(store, store.session(session.id)) for s in derive_turn_spans(log)]
    replayed = InMemorySpanExporter()
    ExporterSink(replayed).export(derived)
    assert sorted(map(comparable, replayed.get_finished_spans())) == sorted(map(comparable, spans))


def test_retries_are_events_on_the_chat_span_with_the_providers_ids_and_cache_usage(db_url, workspace, chat_sse):
    chat_sse.script(
        HttpError(429, "rate_limit_exceeded", "slow down"),
        chat_reply(
            [{"type": "text", "text": "hello"}],
            usage={"prompt_tokens": 50, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 40}},
        ),
    )
    store = ChronicleStore(db_url)
    spec = AgentSpec(
        name="main",
        provider="openai-compatible",
        model="local-model",
        tools=(),
        instructions="Be brief.",
        workspace=str(workspace),
    )
    exporter = InMemorySpanExporter()
    provider = OpenAICompatProvider("local-model", api_key="k-123456", base_url=chat_sse.url + "/v1")
    loop = AgentLoop(store, provider, toolbox_for(()), workspace, options=LoopOptions(retry=RetryPolicy(base_s=0.01, cap_s=0.02)))
    loop.hooks.add(TraceHook(store, ExporterSink(exporter), capture=True))
    session, _ = start_session(store, spec, "say hello")
    assert asyncio.run(loop.run_next(session.id)).status == "completed"

    names = by_name(exporter.get_finished_spans())
    chat = names["chat local-model"][0]
    assert chat.attributes["gen_ai.provider.name"] == "openai" and chat.attributes["gen_ai.response.id"] == "chatcmpl-test"
    assert chat.attributes["chronicle.provider.request_id"] == "req_stream_test"
    assert chat.attributes["gen_ai.usage.input_tokens"] == 50 and chat.attributes["gen_ai.usage.cache_read.input_tokens"] == 40
    assert chat.attributes["chronicle.attempts"] == 2
    retry = [e for e in chat.events if e.name == "chronicle.model_call.retry"]
    assert len(retry) == 1 and retry[0].attributes["http.response.status_code"] == 429
    assert retry[0].attributes["error.type"] == "rate_limit_exceeded"
    agent = names["invoke_agent main"][0]
    assert json.loads(agent.attributes["gen_ai.input.messages"])[0]["parts"][0]["content"] == "say hello"
    assert json.loads(agent.attributes["gen_ai.system_instructions"])[0]["content"] == "Be brief."
    assert json.loads(chat.attributes["gen_ai.output.messages"])[0]["parts"] == [{"type": "text", "content": "hello"}]


def test_a_turn_keeps_the_model_it_ran_on_after_the_session_changes_model(db_url, workspace, tmp_path):
    """`chronicle model SID other` applies from the next turn: an export after it labels the earlier turns with the
    model they ran on, as the live spans did, not with the session's current model."""
    from chronicle.runtime.app.model_change import change_model
    from chronicle.runtime.sessions import submit_input

    path = tmp_path / "script.json"
    path.write_text(json.dumps({"agents": {"main": [[response(text("one"))], [response(text("two"))]]}}), encoding="utf-8")
    store = ChronicleStore(db_url)
    spec = AgentSpec(name="main", provider=f"scripted:{path}", model="scripted", tools=(), workspace=str(workspace))
    exporter = InMemorySpanExporter()
    session, _ = start_session(store, spec, "first")
    assert asyncio.run(traced_loop(store, ScriptedProvider(path), (), workspace, exporter).run_next(session.id)).status == "completed"
    assert change_model(store, session.id, "other").changed
    submit_input(store, session.id, "second")
    assert asyncio.run(traced_loop(store, ScriptedProvider(path), (), workspace, exporter).run_next(session.id)).status == "completed"

    live = exporter.get_finished_spans()
    agents = sorted((s for s in live if s.name == "invoke_agent main"), key=lambda s: s.attributes["chronicle.turn.number"])
    assert [s.attributes["gen_ai.request.model"] for s in agents] == ["scripted", "other"]
    derived = [s for log in session_logs(store, store.session(session.id)) for s in derive_turn_spans(log)]
    replayed = InMemorySpanExporter()
    ExporterSink(replayed).export(derived)
    assert sorted(map(comparable, replayed.get_finished_spans())) == sorted(map(comparable, live))


def test_a_chat_span_reports_the_providers_own_stop_reason_not_ours(db_url, workspace, sse):
    """model_context_window_exceeded through the real SDK: the loop reads it as max_tokens, a trace says what the API said."""
    from chronicle.runtime.providers.anthropic_provider import AnthropicProvider
    from tests.sse_server import reply

    model = "claude-sonnet-4-6"
    sse.script(reply([{"type": "text", "text": "The answer is long and"}], stop_reason="model_context_window_exceeded"))
    store = ChronicleStore(db_url)
    spec = AgentSpec(provider="anthropic", model=model, tools=(), workspace=str(workspace))
    session, _ = start_session(store, spec, "explain")
    exporter = InMemorySpanExporter()
    provider = AnthropicProvider(model, api_key="sk-ant-test-0123456789-secret", base_url=sse.url)
    outcome = asyncio.run(traced_loop(store, provider, (), workspace, exporter).run_next(session.id))
    assert outcome is not None and outcome.status == "completed"
    turn = store.turn(outcome.turn_id)
    assert turn.steps[0]["response"]["stop_reason"] == "max_tokens"  # ours, still what the loop decides by
    [live] = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    assert list(live.attributes["gen_ai.response.finish_reasons"]) == ["model_context_window_exceeded"]
    [log] = list(session_logs(store, store.session(session.id)))
    [chat] = [s for s in derive_turn_spans(log, capture_content=True) if s.name.startswith("chat ")]
    assert chat.attributes["gen_ai.response.finish_reasons"] == ["model_context_window_exceeded"]
    assert json.loads(str(chat.attributes["gen_ai.output.messages"]))[0]["finish_reason"] == "model_context_window_exceeded"
