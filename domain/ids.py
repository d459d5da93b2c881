"""Deterministic ids: a re-run after a crash collides with what was stored instead of duplicating it."""

from __future__ import annotations

from hashlib import sha1
from typing import Any
from uuid import NAMESPACE_URL, UUID, SafeUUID

_new_uuid = UUID.__new__
_set = object.__setattr__
#: RFC 4122 version 5 and variant bits, as `uuid.UUID(version=5)` sets them.
_CLEAR = ~((0xF000 << 64) | (0xC000 << 48))
_V5 = (5 << 76) | (0x8000 << 48)
_UNKNOWN = SafeUUID.unknown


def uuid5(namespace: UUID, name: str) -> UUID:
    """`uuid.uuid5`, the same UUID at half the cost: a rebuild derives a tool call's id for every
    tool result it reads, and `UUID(bytes=…, version=5)` re-checks and re-packs what is known to be
    16 bytes. Built as `UUID.__init__` builds one (its two slots set directly);
    tests/unit/test_ids.py requires equality with `uuid.uuid5`."""
    value = (int.from_bytes(sha1(namespace.bytes + name.encode(), usedforsecurity=False).digest()[:16], "big") & _CLEAR) | _V5
    made = _new_uuid(UUID)
    _set(made, "int", value)
    _set(made, "is_safe", _UNKNOWN)
    return made

CHRONICLE_NS = uuid5(NAMESPACE_URL, "https://chronicle.invalid/ids")
SESSION_INDEX_ID = uuid5(CHRONICLE_NS, "/sessions")
INPUT_INDEX_ID = uuid5(CHRONICLE_NS, "/inputs")


def turn_id(session_id: UUID, input_id: str) -> UUID:
    return uuid5(session_id, f"turn/{input_id}")


def tool_call_id(turn_id_: UUID, step: int, tool_use_id: str) -> UUID:
    return uuid5(turn_id_, f"tool/{step}/{tool_use_id}")


#: Stop reasons of a response that opens no tool call whatever its blocks (domain/turn_steps.py
#: `step_entry`): it did not finish. A stream broken after a tool_use block, or a response refused
#: for duplicate tool_use ids (runtime/response_checks.py), keeps its blocks and has no calls.
OPENS_NO_CALLS = ("error", "aborted")


def tool_call_ids(turn_id_: UUID, steps: list[dict[str, Any]]) -> list[UUID]:
    """The ids of the tool calls a turn's recorded responses opened, in order: derived from
    the turn alone, so listing a session's aggregates reads no tool call."""
    return [
        tool_call_id(turn_id_, step["step"], block["id"])
        for step in steps if step["response"].get("stop_reason") not in OPENS_NO_CALLS
        for block in step["response"].get("content", []) if block.get("type") == "tool_use"
    ]


def child_session_id(parent_tool_call_id: UUID, index: int) -> UUID:
    return uuid5(parent_tool_call_id, f"child/{index}")


def lease_id(session_id: UUID) -> UUID:
    return uuid5(session_id, "lease")


def reply_lease_id(turn_id_: UUID) -> UUID:
    """The lease a server holds while it posts a turn's reply (or a routine run's findings): one per
    turn, so of two servers that find the same reply due, one sends it and the other passes it by."""
    return uuid5(turn_id_, "reply-lease")


REFLECTION_INDEX_ID = uuid5(CHRONICLE_NS, "/reflections")


def task_id(child_session_id_: UUID) -> UUID:
    """The task board entry of a delegated child: one per child session."""
    return uuid5(child_session_id_, "task")


def board_index_id(session_id: UUID) -> UUID:
    """The log of tasks posted on a session's board ahead of delegation, in the order they were posted."""
    return uuid5(session_id, "task-board")


def attachment_id(sha256: str) -> UUID:
    """Content-addressed: the same bytes always get the same id, so they are stored once."""
    return uuid5(CHRONICLE_NS, f"/attachments/{sha256}")


_CANONICAL = "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx"


def prefix_bounds(prefix: str) -> tuple[UUID, UUID] | None:
    """The lowest and highest ids a prefix of an id's canonical form (lower case, dashes where they go) can begin;
    None for text that begins no id (every id then is "no match")."""
    if not prefix or len(prefix) > len(_CANONICAL):
        return None
    for char, slot in zip(prefix, _CANONICAL, strict=False):
        if (slot == "-") != (char == "-") or (slot == "x" and char not in "0123456789abcdef"):
            return None
    digits = prefix.replace("-", "")
    return UUID(digits.ljust(32, "0")), UUID(digits.ljust(32, "f"))


def notes_board_id(top_session_id: UUID) -> UUID:
    """The shared notes of a delegation tree (domain/notes.py), kept on its top-level session."""
    return uuid5(top_session_id, "notes")
