"""The compaction summary's request: what is summarised goes to the model as plain text.

The Messages API refuses a request whose messages hold `tool_use` or `tool_result` blocks unless it
defines tools (400 invalid_request_error: "Requests which include tool_use or tool_result blocks must
define tools."), and a summary call must not offer tools the model could call instead of answering.
So the conversation to summarise is rendered as a transcript in one user message: the user's and the
assistant's text, each tool call with its input and each tool result (long ones shortened to their
head and tail), attachments by name. Thinking is left out: it is the model's scratch work, and the
text and tool results say what came of it. Both compactions (older turns: runtime/compaction.py; a
turn's own steps: runtime/turn_compaction.py) build their request here. Nothing of it is recorded,
and replay re-records compactions without asking (runtime/app/replay_compaction.py), so how the
transcript reads can change without touching any stored session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from chronicle.domain.content import (
    PARTIAL_INPUT_KEY,
    DocumentBlock,
    ImageBlock,
    Message,
    RedactedThinkingBlock,
    TextBlock,
    ThinkingBlock,
    ToolResultBlock,
    ToolUseBlock,
)

from .providers.base import ModelRequest, Provider, ignore_deltas

SUMMARY_SYSTEM = "You write summaries of conversations between a user and a coding agent, for the agent to continue from."
SUMMARY_PROMPT = (
    "Summarise the conversation above so that you can continue the work from the summary alone: the user's "
    "goals, decisions made, files touched and what was learnt from tools, and what remains to do. Be concise."
)
#: A tool result longer than this keeps its head and tail (most tools say what matters first or last).
MAX_RESULT_CHARS = 2_000
#: A tool call's input longer than this (a whole file written, say) is cut after its head.
MAX_INPUT_CHARS = 1_000
SPEAKERS = {"user": "User", "assistant": "Assistant"}


def shorten(text: str, limit: int, tail: bool = True) -> str:
    """`text` within about `limit` characters, saying how much was left out."""
    if len(text) <= limit:
        return text
    if not tail:
        return f"{text[:limit]}… [{len(text) - limit} more characters]"
    head = limit * 3 // 4
    end = limit - head
    return f"{text[:head]}\n… [{len(text) - head - end} characters left out] …\n{text[-end:]}"


def attachment(kind: str, source: dict[str, Any]) -> str:
    name = source.get("name") if isinstance(source, dict) else None
    return f"[{kind} {name}]" if name else f"[{kind}]"


def render_block(block: Any, tool_names: dict[str, str]) -> str | None:
    """One block as the transcript shows it; None for what it leaves out."""
    if isinstance(block, TextBlock):
        return block.text if block.text.strip() else None
    if isinstance(block, (ThinkingBlock, RedactedThinkingBlock)):
        return None
    if isinstance(block, ToolUseBlock):
        tool_names[block.id] = block.name
        arguments = block.partial_input_json if block.cut else json.dumps(block.input, ensure_ascii=False, sort_keys=True)
        return f"[tool call {block.name} {shorten(arguments or '{}', MAX_INPUT_CHARS, tail=False)}]"
    if isinstance(block, ToolResultBlock):
        name = tool_names.get(block.tool_use_id, "tool")
        label = "tool error" if block.is_error else "tool result"
        return f"[{label} {name}: {shorten(block.content, MAX_RESULT_CHARS)}]"
    if isinstance(block, ImageBlock):
        return attachment("image", block.source)
    if isinstance(block, DocumentBlock):
        return attachment("document", block.source)
    # A block this version does not model (server tool calls and their results): named, not sent as a block.
    extra = getattr(block, "model_extra", None) or {}
    if "name" in extra and "input" in extra:
        arguments = extra.get(PARTIAL_INPUT_KEY) or json.dumps(extra["input"], ensure_ascii=False, sort_keys=True)
        return f"[{block.type} {extra['name']} {shorten(arguments, MAX_INPUT_CHARS, tail=False)}]"
    return f"[{block.type}]"


def transcript(messages: list[Message]) -> str:
    """The conversation as plain text: one paragraph per message, headed by who spoke."""
    tool_names: dict[str, str] = {}
    parts: list[str] = []
    for message in messages:
        lines = [line for line in (render_block(b, tool_names) for b in message.content) if line is not None]
        if lines:
            parts.append(f"{SPEAKERS[message.role]}:\n" + "\n".join(lines))
    return "\n\n".join(parts)


def summary_request(messages: list[Message], *, model: str, agent: str, session_id: str, call_index: int,
                    turn_number: int = 1) -> ModelRequest:
    """The summary call for `messages` (the conversation to summarise, as the main model read it):
    one user message, the transcript then the instruction; no tools, no tool blocks."""
    text = f"<conversation>\n{transcript(messages)}\n</conversation>\n\n{SUMMARY_PROMPT}"
    return ModelRequest(
        model=model, system=SUMMARY_SYSTEM, messages=[Message(role="user", content=[TextBlock(text=text)])], tools=[],
        max_tokens=2048, agent=agent, session_id=session_id, turn_number=turn_number, call_index=call_index, auxiliary="summary",
    )


@dataclass(frozen=True)
class SummaryAnswer:
    """What a summary call gave: its text (None when it failed, `failure` saying why), and the usage and
    the model that answered, which are recorded either way."""

    text: str | None
    usage: dict[str, Any]
    model: str
    failure: str | None = None


async def ask_for_summary(provider: Provider, request: ModelRequest) -> SummaryAnswer:
    """The summary call both compactions make; an error or an empty answer is a failure, not a summary."""
    response = await provider.stream(request, ignore_deltas)
    usage, model = response.usage.model_dump(), response.model or request.model  # the model that answered, as titles record
    if response.stop_reason == "error" or not response.text.strip():
        return SummaryAnswer(None, usage, model, response.error.message if response.error else "the model returned no text")
    return SummaryAnswer(response.text.strip(), usage, model)

