"""How Turn records written by earlier versions are read today: its snapshots, ModelResponded and
ModelCallRetried.

They live apart from the aggregate because they only ever grow: each schema change adds a step,
and no step goes while a store may still hold that shape (tests/fixtures/v1_store.db does). The
Turn and its events name them as their `upcast_vN_vN+1`, which is where eventsourcing looks for them.
"""

from __future__ import annotations

from typing import Any

from .stored_response import expand


def error_from_reason(reason: str) -> dict[str, Any]:
    """A provider error as data, recovered from a v1 retry's "kind: message" text."""
    kind, sep, message = reason.partition(": ")
    if not sep:
        kind, message = "error", reason
    return {"kind": kind, "message": message, "status": None, "retry_after_s": None}


#: What a ModelResponded keeps of the request (v3): see the event's docstring.
REQUEST_FIELDS = ("model", "max_tokens", "message_count")


def response_v2(response: dict[str, Any]) -> dict[str, Any]:
    return {**response, "stop_details": response.get("stop_details")}


def snapshot_v1_v2(state: dict[str, Any]) -> None:
    """v2: each entry of `retries` carries `error` (see ModelCallRetried v2), and each step its time
    `at`. A v1 snapshot never recorded step times, so they come back as None (readers such as the
    rate guard fall back to the turn's start)."""
    state["retries"] = [{**r, "error": r.get("error") or error_from_reason(r.get("reason", ""))} for r in state["retries"]]
    if "steps" in state:
        state["steps"] = [{"at": None, **step} for step in state["steps"]]


def snapshot_v2_v3(state: dict[str, Any]) -> None:
    """v3: each step's response carries `stop_details` (see ModelResponded v2)."""
    for step in state.get("steps", []):
        step["response"] = response_v2(step["response"])


def snapshot_v3_v4(state: dict[str, Any]) -> None:
    """v4: each step's response is the full dump, every default present (domain/stored_response.py),
    whichever version of ModelResponded recorded it."""
    for step in state.get("steps", []):
        step["response"] = expand(step["response"])


def responded_v1_v2(state: dict[str, Any]) -> None:
    state["response"] = response_v2(state["response"])


def responded_v2_v3(state: dict[str, Any]) -> None:
    delta = state.get("request_delta") or {}
    state["request_delta"] = {k: delta[k] for k in REQUEST_FIELDS if k in delta}


def retried_v1_v2(state: dict[str, Any]) -> None:
    state["error"] = error_from_reason(state.get("reason", ""))
