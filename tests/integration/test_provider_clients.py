"""Each run's HTTP client is closed as its event loop ends, for the real Anthropic and OpenAI SDKs
against loopback servers. Every `run_sync` runs its turns in a loop of its own, and the client made
there used to be left open: its sockets were closed by the collector, each with a ResourceWarning
inside whatever code ran then (a user's program running with warnings on saw them)."""

from __future__ import annotations

import asyncio
import gc
import warnings
from typing import Any

from chronicle.domain.content import Message, TextBlock
from chronicle.runtime.providers.anthropic_provider import AnthropicProvider
from chronicle.runtime.providers.base import ModelRequest
from chronicle.runtime.providers.openai_compat import OpenAICompatProvider
from tests.chat_sse_server import chat_reply, chat_sse  # noqa: F401
from tests.sse_server import HttpError, reply, sse  # noqa: F401


async def _ignore(_: object) -> None:
    return None


def _request(model: str) -> ModelRequest:
    return ModelRequest(model=model, messages=[Message(role="user", content=[TextBlock(text="hi")])], max_tokens=100)


def _unclosed_after_two_runs(make: Any, model: str) -> tuple[list[str], list[str]]:
    """The answers of two runs, each in a loop of its own as run_sync makes them, and the
    ResourceWarnings seen once the provider and what those runs left behind are collected."""
    answers = []
    provider = make()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", ResourceWarning)
        for _ in range(2):
            answer = asyncio.run(provider.stream(_request(model), _ignore))
            answers.append(answer.text or (answer.error.kind if answer.error else ""))
        del provider
        gc.collect()
    return answers, [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]


def test_the_anthropic_clients_of_two_runs_are_closed_as_their_loops_end(sse):
    # A streamed answer closes its connection (the loopback server says so, as a stream's end does); an
    # error answered with a length keeps it in the client's pool, as the real API keeps its connections.
    sse.script(reply([{"type": "text", "text": "one"}]), HttpError(400, "invalid_request_error", "no such thing"))
    answers, unclosed = _unclosed_after_two_runs(
        lambda: AnthropicProvider("claude-sonnet-4-6", api_key="sk-ant-test-key", base_url=sse.url), "claude-sonnet-4-6")
    assert answers == ["one", "invalid_request_error"]
    assert unclosed == []


def test_the_openai_compatible_clients_of_two_runs_are_closed_as_their_loops_end(chat_sse):
    chat_sse.script(chat_reply([{"type": "text", "text": "one"}]), HttpError(400, "invalid_request_error", "no such thing"))
    answers, unclosed = _unclosed_after_two_runs(
        lambda: OpenAICompatProvider("local-model", base_url=f"{chat_sse.url}/v1", api_key="sk-test"), "local-model")
    assert answers[0] == "one" and answers[1] not in ("", "one")  # the second run answered with an error
    assert unclosed == []
