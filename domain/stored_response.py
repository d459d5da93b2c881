"""The stored shape of a model response: what the API said, without the defaults it did not say.

A response's dump names every optional field (no error, no id, no stop sequence, no stop details,
cache token counts of zero), which on a busy turn is a fifth of each ModelResponded. The event
keeps only the fields that differ from the defaults; the Turn's state (and so its snapshots and
every reader of `turn.steps`) holds the full dump again, so nothing that reads a step changes.
"""

from __future__ import annotations

from typing import Any, Mapping

#: Top-level fields left out of a stored response when they hold these values.
OMITTED_WHEN = {"error": None, "id": "", "stop_sequence": None, "stop_details": None, "model": ""}
#: Token counts left out of a stored usage when zero.
ZERO_TOKENS = {"input_tokens": 0, "output_tokens": 0, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}


def compact(response: dict[str, Any]) -> dict[str, Any]:
    """The response as stored: defaults left out (content and stop_reason are always kept)."""
    out = {k: v for k, v in response.items() if not (k in OMITTED_WHEN and v == OMITTED_WHEN[k])}
    usage = response.get("usage")
    if isinstance(usage, dict):
        out["usage"] = {k: v for k, v in usage.items() if not (k in ZERO_TOKENS and v == 0)}
    return out


def expand(stored: Mapping[str, Any]) -> dict[str, Any]:
    """The full dump again: every default a compact response left out, put back."""
    return {**OMITTED_WHEN, **stored, "usage": {**ZERO_TOKENS, **(stored.get("usage") or {})}}
