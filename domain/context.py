"""What the model reads next, built from recorded turns only (never from a read model).

Responses that did not finish (provider error, abort) are left out: their tool_use blocks may
be truncated and would have no results. So is a response whose tool input was cut (max_tokens
inside a tool_use): its input would have to be invented to be sent back. A turn the model
refused (`stop_reason: "refusal"`) is left out whole, input included, as the API documentation
asks: the refused exchange must not be sent again. Empty text blocks, which the API rejects,
are never sent. Everything left out stays recorded. Consecutive messages of one role are
merged, which is what the Messages API does with them anyway, so a failed turn never breaks
the alternation.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from .content import Message, TextBlock, load_blocks, sendable
from .context_wire import compacted_view as compacted_view  # its readers import it from here
from .context_wire import refused, sent_answer, sent_content, steps_compaction, steps_note


def input_message(turn: Any) -> Message:
    """The user's input: its attachments' blocks (references to stored bytes) first, then the text
    (as an inbound guardrail left it, if one changed it)."""
    attached = load_blocks(list(turn.attachments)) if getattr(turn, "attachments", None) else []
    text = getattr(turn, "model_input", None)
    return Message(role="user", content=[*attached, TextBlock(text=turn.input_text if text is None else text)])


def turn_messages(turn: Any, include_input: bool = True) -> list[Message]:
    messages: list[Message] = []
    if refused(turn):
        return messages
    if include_input:
        messages.append(input_message(turn))
    messages.extend(steps_note_messages(turn))
    answer = sent_answer(turn)
    last = len(turn.steps) - 1
    for index in range(first_sent_step(turn), len(turn.steps)):
        messages.extend(step_messages(turn.steps[index], answer if index == last else None))
    return messages


def first_sent_step(turn: Any) -> int:
    """The first step the model reads verbatim: those before it were compacted (Turn.IterationsCompacted)."""
    compaction = steps_compaction(turn)
    return compaction["through_step"] if compaction else 0


def steps_note_messages(turn: Any) -> list[Message]:
    """The summary (or the note) standing for the turn's compacted steps, after its input; none if none were."""
    compaction = steps_compaction(turn)
    return [Message(role="user", content=[TextBlock(text=steps_note(compaction))])] if compaction else []


def step_messages(step: dict[str, Any], answer: str | None = None) -> list[Message]:
    """One recorded step as messages: the response (if it finished) and its tool results.
    `answer`: the turn's final text as a final guardrail changed it (the last step only)."""
    content = sent_content(step, answer)
    if content is None:
        return []
    messages = []
    blocks = sendable(load_blocks(content))
    if blocks:
        messages.append(Message(role="assistant", content=blocks))
    if step["results"]:
        messages.append(Message(role="user", content=load_blocks(step["results"])))
    return messages


def merge_roles(messages: Iterable[Message]) -> list[Message]:
    merged: list[Message] = []
    for message in messages:
        if merged and merged[-1].role == message.role:
            merged[-1] = Message(role=message.role, content=[*merged[-1].content, *message.content])
        else:
            merged.append(message)
    return merged


def build_context(turns: Iterable[Any], summary: str | None = None) -> list[Message]:
    return assemble_context((turn_messages(turn) for turn in turns), summary=summary)


def assemble_context(per_turn: Iterable[list[Message]], summary: str | None = None) -> list[Message]:
    """`build_context` from each turn's `turn_messages`, for callers that keep those per turn."""
    messages: list[Message] = []
    if summary:
        messages.append(
            Message(role="user", content=[TextBlock(text=f"Summary of the conversation so far:\n{summary}")])
        )
    for part in per_turn:
        messages.extend(part)
    return merge_roles(messages)
