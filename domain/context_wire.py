"""What the model reads next, as the Messages API's wire dicts, built from recorded turns.

The same messages `domain.context.build_context` makes, as `Message.wire()` dumps them, for
readers that show or hand on messages rather than send them (`history`, the API's history):
blocks recorded in wire form are handed on as they are (domain/wire_blocks.py) and only the
others go through the content models, imported then. So showing a session's messages does not
import pydantic. tests/unit/test_context_wire.py requires the two builders to agree.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from uuid import UUID

from .wire_blocks import FINISHED_STOP_REASONS, has_cut_input, plain_blocks


def refused(turn: Any) -> bool:
    return any(step["response"].get("stop_reason") == "refusal" for step in turn.steps)


def sent_answer(turn: Any) -> str | None:
    """The final text later turns read in place of the model's, if not the model's own: as a final
    guardrail changed it, or, when one rejected it, a line saying so. A rejected answer (a leak, an
    unsafe reply) stays recorded but is never sent again, as a refused turn is not."""
    error = getattr(turn, "error", None)
    if getattr(turn, "status", None) == "failed" and isinstance(error, dict) and error.get("guardrail"):
        return f"[answer withheld: {error['guardrail']} rejected it]"
    return getattr(turn, "answer", None)


def with_answer(content: list[dict[str, Any]], answer: str) -> list[dict[str, Any]]:
    """The final response's blocks with its text as a final guardrail delivered it: the first text
    block carries the answer, the other text blocks go; thinking and other blocks stay."""
    out: list[dict[str, Any]] = []
    placed = False
    for block in content:
        if block.get("type") != "text":
            out.append(block)
        elif not placed:
            out.append({"type": "text", "text": answer})
            placed = True
    return out if placed else [*out, {"type": "text", "text": answer}]


def compaction_entry(compaction: dict[str, Any]) -> dict[str, Any]:
    """How a session keeps each of its compactions: its text and the number of the branch's first turns it covers,
    with the last of them (not every id: a long session compacts often, and its state is copied on every command).
    A turn stands on any branch after the same turns (undo takes the newest off, redo puts them back in order, a new
    turn ends the redo), so the branch's first `turns` are those it covered when the `turns`-th is `through`."""
    compacted = list(compaction["compacted_turn_ids"])
    return {"summary": compaction.get("summary"), "strategy": compaction.get("strategy"), "at": compaction.get("at"),
            "turns": len(compacted), "through": compacted[-1] if compacted else None}


def holding_compaction(head: list[UUID], compactions: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The compaction that stands for the branch's first turns (`compactions`: the session's `compaction_entry`s,
    oldest first): the newest whose turns are all still the first on `head`, with `compacted_turn_ids` those turns.

    Each compaction covers a prefix of the branch as it was then. An undo that takes back a turn one covers ends it:
    its text no longer describes the branch. An earlier one whose turns all stay on the branch still does, so it
    holds again (undoing the turn the newest covered last leaves the one made before it holding); a redo that puts
    the turns back makes the newer one hold again."""
    for entry in reversed(compactions):
        count = entry["turns"]
        if 0 < count <= len(head) and head[count - 1] == entry["through"]:
            return {**entry, "compacted_turn_ids": list(head[:count])}
    return None


def compacted_view(head: list[UUID], compactions: list[dict[str, Any]]) -> tuple[str | None, list[UUID]]:
    """Which turns of the branch the model reads, and the summary that stands for those before them: after
    the compaction that holds (`holding_compaction`), or the whole head when none does."""
    compaction = holding_compaction(head, compactions)
    if compaction is None:
        return None, list(head)
    return compaction["summary"], head[compaction["turns"]:]


def steps_compaction(turn: Any) -> dict[str, Any] | None:
    """The turn's latest compaction of its own steps (Turn.IterationsCompacted), or None."""
    done = getattr(turn, "iteration_compactions", None)
    return done[-1] if done else None


def steps_note(compaction: dict[str, Any]) -> str:
    """What the model reads in place of a turn's compacted steps, after the turn's input."""
    through, summary = compaction["through_step"], compaction["summary"]
    if summary:
        return f"Summary of the first {through} step(s) of this turn, which are left out of the context:\n{summary}"
    return f"[The first {through} step(s) of this turn are left out of the context to fit the context window.]"


def wire_context(turns: Iterable[Any], summary: str | None = None) -> list[dict[str, Any]]:
    """`[m.wire() for m in build_context(turns, summary)]`."""
    messages: list[dict[str, Any]] = []
    if summary:
        messages.append(_message("user", [{"type": "text", "text": f"Summary of the conversation so far:\n{summary}"}]))
    for turn in turns:
        messages.extend(turn_wire(turn))
    merged: list[dict[str, Any]] = []
    for message in messages:
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = _message(message["role"], [*merged[-1]["content"], *message["content"]])
        else:
            merged.append(message)
    return merged


def turn_wire(turn: Any) -> list[dict[str, Any]]:
    if refused(turn):
        return []
    attachments = list(turn.attachments) if getattr(turn, "attachments", None) else []
    text = getattr(turn, "model_input", None)
    messages = [_message("user", [*_wire(attachments), {"type": "text", "text": turn.input_text if text is None else text}])]
    compaction = steps_compaction(turn)
    if compaction is not None:
        messages.append(_message("user", [{"type": "text", "text": steps_note(compaction)}]))
    answer = sent_answer(turn)
    last = len(turn.steps) - 1
    for index in range(compaction["through_step"] if compaction else 0, len(turn.steps)):
        messages.extend(step_wire(turn.steps[index], answer if index == last else None))
    return messages


def sent_content(step: dict[str, Any], answer: str | None = None) -> list[dict[str, Any]] | None:
    """The step's response blocks as they are sent back (`answer`: the turn's final text as a final
    guardrail changed it, on the last step only), or None when the step sends nothing, its tool
    results included: a response that did not finish, or whose tool input was cut (a tool_use, or a
    server_tool_use / mcp_tool_use the API ran: the block cannot go back without `partial_input_json`,
    which the API refuses, or an invented input; its results would answer blocks the model never sees),
    and a refusal (its turn is left out whole)."""
    response = step["response"]
    content = response.get("content") or []
    if answer is not None:
        content = with_answer(content, answer)
    if response.get("stop_reason") not in FINISHED_STOP_REASONS or response.get("stop_reason") == "refusal":
        return None
    if has_cut_input(content):
        return None
    return content


def step_wire(step: dict[str, Any], answer: str | None = None) -> list[dict[str, Any]]:
    content = sent_content(step, answer)
    if content is None:
        return []
    messages = []
    blocks = _wire(content, sendable_only=True)
    if blocks:
        messages.append(_message("assistant", blocks))
    if step["results"]:
        messages.append(_message("user", _wire(step["results"])))
    return messages


def _message(role: str, content: list[dict[str, Any]]) -> dict[str, Any]:
    return {"role": role, "content": content}


def _wire(blocks: list[Any], sendable_only: bool = False) -> list[dict[str, Any]]:
    """The blocks' wire form: a copy of them when they are already in it, else through the models."""
    if plain_blocks(blocks, sendable_only):
        return [_copy(block) for block in blocks]
    from .content import dump_blocks, load_blocks, sendable

    loaded = load_blocks(list(blocks))
    return dump_blocks(sendable(loaded) if sendable_only else loaded)


def _copy(value: Any) -> Any:
    """A fresh copy of JSON-like data, so no caller can change a recorded turn through what it was given."""
    if type(value) is dict:
        return {key: _copy(item) for key, item in value.items()}
    if type(value) is list:
        return [_copy(item) for item in value]
    return value
