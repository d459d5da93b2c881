"""Effects on what the model reads, decided per session and recorded on its spec.

Tool-result trimming (seed 004's built-in effect): once a turn is more than
`trim_tool_results_after_turns` turns old, its tool results longer than
`trim_tool_results_to_chars` are shortened in the context, with a note saying where the rest
is. Only the context changes; the log keeps every result whole, and `history` shows them whole.
Both numbers are recorded on the spec when the session starts (from `[effects]` in
chronicle.toml), so a resumed or replayed session trims exactly as the original did.

    [effects]
    trim_tool_results_after_turns = 3    # 0 (the default) = never trim
    trim_tool_results_to_chars = 200
"""

from __future__ import annotations

from typing import Any, Iterable
from uuid import UUID

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.content import Message, ToolResultBlock
from chronicle.domain.context import assemble_context

from .settings import SettingsError
from .turn_messages import turn_messages_cache

KEYS = {"trim_tool_results_after_turns": 0, "trim_tool_results_to_chars": 200}


class EffectsError(SettingsError):
    """An [effects] table that cannot be used; the message names the key."""


def with_effects(spec: AgentSpec, config: dict[str, Any], source: str = "chronicle.toml") -> AgentSpec:
    table = config.get("effects") or {}
    if not isinstance(table, dict):
        raise EffectsError(f"{source}: [effects] must be a table")
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise EffectsError(f"{source}: unknown key(s) in [effects]: {', '.join(unknown)}; allowed: {', '.join(sorted(KEYS))}")
    values = {}
    for key, default in KEYS.items():
        value = table.get(key, default)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise EffectsError(f"{source}: [effects] {key} must be a whole number, 0 or more (got {value!r})")
        values[key] = value
    return spec.model_copy(update=values)


def trim(messages: list[Message], to_chars: int) -> list[Message]:
    out = []
    for message in messages:
        blocks = []
        changed = False
        for block in message.content:
            if isinstance(block, ToolResultBlock) and len(block.content) > to_chars:
                note = f"\n[trimmed from {len(block.content)} characters in this context; the log keeps the whole result]"
                block = block.model_copy(update={"content": block.content[:to_chars] + note})
                changed = True
            blocks.append(block)
        out.append(message.model_copy(update={"content": blocks}) if changed else message)
    return out


def prior_context(store: Any, spec: AgentSpec, turn_ids: Iterable[UUID], summary: str | None) -> list[Message]:
    """The prior turns' messages as the model reads them, older tool results trimmed if the spec says so."""
    cache = turn_messages_cache(store)
    per_turn = cache.many(turn_ids)
    after = spec.trim_tool_results_after_turns
    if after:
        cut = len(per_turn) - after + 1  # the turn running now is the newest: prior turn i is len - i turns old
        per_turn = [trim(m, spec.trim_tool_results_to_chars) if i < cut else m for i, m in enumerate(per_turn)]
    return assemble_context(per_turn, summary=summary)
