"""Deterministic ids: a re-run after a crash collides with what was stored instead of duplicating it."""

from __future__ import annotations

from uuid import NAMESPACE_URL, UUID, uuid5

CHRONICLE_NS = uuid5(NAMESPACE_URL, "https://chronicle.invalid/ids")
SESSION_INDEX_ID = uuid5(CHRONICLE_NS, "/sessions")
INPUT_INDEX_ID = uuid5(CHRONICLE_NS, "/inputs")


def turn_id(session_id: UUID, input_id: str) -> UUID:
    return uuid5(session_id, f"turn/{input_id}")


def tool_call_id(turn_id_: UUID, step: int, tool_use_id: str) -> UUID:
    return uuid5(turn_id_, f"tool/{step}/{tool_use_id}")


def child_session_id(parent_tool_call_id: UUID, index: int) -> UUID:
    return uuid5(parent_tool_call_id, f"child/{index}")


def lease_id(session_id: UUID) -> UUID:
    return uuid5(session_id, "lease")


REFLECTION_INDEX_ID = uuid5(CHRONICLE_NS, "/reflections")


def task_id(child_session_id_: UUID) -> UUID:
    """The task board entry of a delegated child: one per child session."""
    return uuid5(child_session_id_, "task")


def attachment_id(sha256: str) -> UUID:
    """Content-addressed: the same bytes always get the same id, so they are stored once."""
    return uuid5(CHRONICLE_NS, f"/attachments/{sha256}")
