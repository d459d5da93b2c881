"""The messages of finished turns, parsed once per process.

Every model call's context starts with the turns before it on the branch. Loading each of
them (a repository get: a query for newer events and a deep copy of the cached aggregate)
and parsing its blocks through pydantic again for every new turn made a session's N-th turn
cost O(N): ≈ 1.2 ms per earlier turn, 180 ms per turn at 150 turns. A finished turn never
changes (its status is terminal in the Turn lifecycle and its messages come only from its
input and steps), so its messages can be kept: a turn still in flight is always read fresh.
Messages are frozen pydantic models, so sharing them is safe; callers get new lists.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any, Iterable
from uuid import UUID

from chronicle.domain.content import Message
from chronicle.domain.context import assemble_context, turn_messages

MAXSIZE = 10_000


class FinishedTurnMessages:
    def __init__(self, store: Any, maxsize: int = MAXSIZE) -> None:
        self.store = store
        self.maxsize = maxsize
        self._cache: OrderedDict[UUID, list[Message]] = OrderedDict()

    def of(self, turn_id: UUID) -> list[Message]:
        cached = self._cache.get(turn_id)
        if cached is not None:
            self._cache.move_to_end(turn_id)
            return list(cached)
        return list(self._keep(turn_id, self.store.turn(turn_id)))

    def many(self, turn_ids: Iterable[UUID]) -> list[list[Message]]:
        """Each turn's messages, in order; the turns not kept yet are read together (`store.turns`)."""
        wanted = list(turn_ids)
        missing = [t for t in dict.fromkeys(wanted) if t not in self._cache]
        fresh: dict[UUID, list[Message]] = {}
        if len(missing) > 1:
            for turn_id, turn in zip(missing, self.store.turns(missing), strict=True):
                fresh[turn_id] = self._keep(turn_id, turn)
        return [list(fresh[t]) if t in fresh else self.of(t) for t in wanted]

    def _keep(self, turn_id: UUID, turn: Any) -> list[Message]:
        messages = turn_messages(turn)
        if turn.finished:
            self._cache[turn_id] = messages
            if len(self._cache) > self.maxsize:
                self._cache.popitem(last=False)
        return messages

    def __contains__(self, turn_id: UUID) -> bool:
        return turn_id in self._cache


def turn_messages_cache(store: Any) -> FinishedTurnMessages:
    """The store's cache (one per store object, so one per database and process)."""
    cache = getattr(store, "_finished_turn_messages", None)
    if cache is None:
        cache = FinishedTurnMessages(store)
        store._finished_turn_messages = cache
    return cache


def context_of(store: Any, turn_ids: Iterable[UUID], summary: str | None = None) -> list[Message]:
    """`build_context` of these turns, reading finished turns from the cache."""
    return assemble_context(turn_messages_cache(store).many(turn_ids), summary=summary)
