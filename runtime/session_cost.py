"""A session's cost in USD, computed from the usage recorded on its turns.

Every turn the session ran counts, including turns later undone: that money was spent. This
reads the turns directly for now; a cost projection can replace it without changing the
pricing function it uses (`pricing.price`).
"""

from __future__ import annotations

from typing import Any

from .pricing import total


def session_usd(store: Any, session: Any) -> float | None:
    """USD for all model calls of the session; None if a call that used tokens has no price."""
    calls = []
    for turn_id in session.turns:
        turn = store.turn(turn_id)
        for step in turn.steps:
            response = step["response"]
            calls.append((response.get("model") or session.spec.model, response.get("usage") or {}, turn.started_at))
    return total(calls)
