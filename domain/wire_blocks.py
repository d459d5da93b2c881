"""Which recorded blocks are already in wire form, decided without the content models.

A block recorded from the API holds exactly its model's fields in its model's order, so
validating it and dumping it back gives the same dict; nearly every block is such a block. Readers
of the past and `history` of the present hand those on as they are and build models only for the
rest, so a command that shows messages need not import pydantic (≈ 35 ms) to show them.
`SHAPES` is written out here, not read from the models, for that reason;
tests/unit/test_wire_blocks.py requires it to equal what the models say.
"""

from __future__ import annotations

import math
from typing import Any

#: Set by the stream assembler on a block whose streamed input JSON never completed (`tool_use`,
#: and the API's own `server_tool_use`, `mcp_tool_use`, any block that streams input_json_delta):
#: the raw text the model produced, kept instead of a guessed completion. Not an API field: such a
#: block is never sent back, nor is the response holding it (`has_cut_input`).
PARTIAL_INPUT_KEY = "partial_input_json"


def has_cut_input(content: Any) -> bool:
    """Whether any block of a recorded response's content (dicts) had its input cut, whatever its type."""
    return any(isinstance(block, dict) and PARTIAL_INPUT_KEY in block for block in content or ())

#: Stop reasons of a response that the model actually finished and may be sent back.
FINISHED_STOP_REASONS = frozenset({"end_turn", "tool_use", "max_tokens", "stop_sequence", "pause_turn", "refusal"})

#: Per known block type: its model's field names in dump order, and the plain type each field but
#: `type` must hold for the block to dump as it is.
SHAPES: dict[str, tuple[tuple[str, ...], tuple[tuple[str, type], ...]]] = {
    "text": (("type", "text"), (("text", str),)),
    "thinking": (("type", "thinking", "signature"), (("thinking", str), ("signature", str))),
    "redacted_thinking": (("type", "data"), (("data", str),)),
    "tool_use": (("type", "id", "name", "input"), (("id", str), ("name", str), ("input", dict))),
    "tool_result": (("type", "tool_use_id", "content", "is_error"),
                    (("tool_use_id", str), ("content", str), ("is_error", bool))),
    "image": (("type", "source"), (("source", dict),)),
    "document": (("type", "source"), (("source", dict),)),
}


def dumps_as_is(blocks: Any, sendable_only: bool = False) -> bool:
    """Whether `blocks` are already their wire form, so no model need be built to find it.

    True only for blocks of a known type holding exactly their model's fields, in its order, each
    of the plain type it names (defaults written out, no extra fields, no object to convert); with
    `sendable_only`, also no text block the API would refuse back. Non-finite numbers inside an
    object field (which pydantic's dump turns into null) are the caller's to rule out: `all_finite`
    on the values, or a look at the JSON text."""
    if type(blocks) is not list:
        return False
    for block in blocks:
        if type(block) is not dict:
            return False
        kind = block.get("type")
        shape = SHAPES.get(kind) if type(kind) is str else None
        if shape is None or tuple(block) != shape[0]:
            return False
        for name, plain in shape[1]:
            if type(block[name]) is not plain:
                return False
        if sendable_only and kind == "text" and not block["text"].strip():
            return False
    return True


def all_finite(value: Any) -> bool:
    """No NaN or infinity anywhere in `value` (containers walked)."""
    kind = type(value)
    if kind is float:
        return math.isfinite(value)
    if kind is dict:
        return all(all_finite(v) for v in value.values())
    if kind is list or kind is tuple:
        return all(all_finite(v) for v in value)
    return True


def plain_blocks(blocks: Any, sendable_only: bool = False) -> bool:
    """`dumps_as_is`, with the object fields' numbers checked too: the blocks' wire form is themselves."""
    return dumps_as_is(blocks, sendable_only) and all(
        all_finite(block.get("input")) and all_finite(block.get("source")) for block in blocks
    )
