"""The conversation as of a point in the past, read from the history projection by index.

Rebuilding the past from events decodes every event of every turn on the branch up to the
cut (≈ 80 ms at 500 turns). The history projection already holds every turn's messages,
decoded and numbered, and each row carries the log position of the event that recorded it,
so the conversation at a cut is one indexed query per few hundred turns plus the parse of
the messages it returns.

This is a read path for showing the past (`history --at/--version`), never the model's
context for continuing a session: that is always built from events. The projection is used
only when it has applied every event in the log (a row it has not written yet would be
silently missing); otherwise the past is rebuilt from events, exactly as before.
"""

from __future__ import annotations

import json
from typing import Any
from uuid import UUID

from chronicle.domain.content import FINISHED_STOP_REASONS, Message, load_blocks
from chronicle.domain.context import assemble_context, build_context
from chronicle.projections import ProjectionEngine
from chronicle.projections.history import HistoryProjection
from chronicle.projections.sql import Tx, iso

from .store import ChronicleStore
from .timetravel import Cut, turns_at

#: Turn ids per query: far below SQLite's parameter limit, and a long branch is a few queries.
CHUNK = 400


def history_engine(store: ChronicleStore) -> ProjectionEngine:
    """An engine over the history projection alone: a read of the past sets up and moves only it."""
    engine = getattr(store, "_history_engine", None)
    if engine is None:
        engine = ProjectionEngine(store, [HistoryProjection()])
        store._history_engine = engine  # type: ignore[attr-defined]
    return engine


def is_current(store: ChronicleStore, engine: ProjectionEngine) -> bool:
    """Whether the history projection has applied every event committed so far."""
    return engine.position(HistoryProjection.name) >= store.max_position()


def context_at(store: ChronicleStore, cut: Cut, engine: ProjectionEngine | None = None) -> list[Message]:
    """The messages the model read as of `cut`: from the projection when it is current, else from events."""
    summary, view = cut.session.context_view()
    if engine is not None and is_current(store, engine):
        with engine.read() as tx:
            rows = _rows(tx, view, cut)
        return assemble_context((turn_messages_from_rows(rows.get(str(t), [])) for t in view), summary=summary)
    by_id = {turn.id: turn for turn in turns_at(store, cut)}
    return build_context([by_id[t] for t in view], summary=summary)


def _rows(tx: Tx, view: list[UUID], cut: Cut) -> dict[str, list[tuple[Any, ...]]]:
    """Each turn's message rows recorded at or before the cut (or in its transaction), by seq."""
    by_turn: dict[str, list[tuple[Any, ...]]] = {}
    ids = [str(t) for t in view]
    for start in range(0, len(ids), CHUNK):
        chunk = ids[start:start + CHUNK]
        marks = ", ".join(["%s"] * len(chunk))
        sql = f"SELECT turn_id, seq, step, role, content, stop_reason FROM proj_history_messages WHERE turn_id IN ({marks})"
        params: list[Any] = list(chunk)
        if cut.timestamp is not None:
            # As `turns_as_of` does: events at or before the cut's position, or stamped no later
            # than it (a transaction's events share one timestamp, so it stays whole).
            sql += " AND (position <= %s OR at <= %s)"
            params += [cut.position, iso(cut.timestamp)]
        for row in tx.rows(sql + " ORDER BY turn_id, seq", params):
            by_turn.setdefault(row[0], []).append(row[1:])
    return by_turn


def turn_messages_from_rows(rows: list[tuple[Any, ...]]) -> list[Message]:
    """`domain.context.turn_messages` over projection rows: the input, then each step whose
    response finished with content, followed by its tool results if it has any."""
    messages: list[Message] = []
    shown: set[int] = set()
    for _seq, step, role, content, stop_reason in rows:
        blocks = json.loads(content)
        if step is None:
            messages.append(Message(role="user", content=load_blocks(blocks)))
        elif role == "assistant":
            if stop_reason in FINISHED_STOP_REASONS and blocks:
                messages.append(Message(role="assistant", content=load_blocks(blocks)))
                shown.add(step)
        elif step in shown and blocks:
            messages.append(Message(role="user", content=load_blocks(blocks)))
    return messages
