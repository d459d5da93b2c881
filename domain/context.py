"""What the model reads next, built from recorded turns only (never from a read model).

Responses that did not finish (provider error, abort) are left out: their tool_use blocks may
be truncated and would have no results. Consecutive messages of one role are merged, which is
what the Messages API does with them anyway, so a failed turn never breaks the alternation.
"""

from __future__ import annotations

from typing import Any, Iterable

from .content import FINISHED_STOP_REASONS, Message, TextBlock, load_blocks


def turn_messages(turn: Any, include_input: bool = True) -> list[Message]:
    messages: list[Message] = []
    if include_input:
        messages.append(Message(role="user", content=[TextBlock(text=turn.input_text)]))
    for step in turn.steps:
        messages.extend(step_messages(step))
    return messages


def step_messages(step: dict[str, Any]) -> list[Message]:
    """One recorded step as messages: the response (if it finished) and its tool results."""
    response = step["response"]
    if response.get("stop_reason") not in FINISHED_STOP_REASONS or not response.get("content"):
        return []
    messages = [Message(role="assistant", content=load_blocks(response["content"]))]
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
