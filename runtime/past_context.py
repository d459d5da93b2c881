"""The conversation as of a point in the past, read from the history projection by index.

Rebuilding the past from events decodes every event of every turn on the branch up to the
cut (≈ 80 ms at 500 turns). The history projection already holds every turn's messages,
decoded and numbered, and each row carries the log position of the event that recorded it,
so the conversation at a cut is one indexed query per few hundred turns plus the parse of
the messages it returns.

This is a read path for showing the past (`history --at/--version`), never the model's
context for continuing a session: that is always built from events. The projection is used
only when it has applied every event of the turns it is asked about (a row it has not written
yet would be silently missing): the ids of the events after its position are checked against
those turns, so writes to other sessions, or later turns of this one, do not stop it from
answering. Otherwise the past is rebuilt from events, exactly as before.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from pydantic import TypeAdapter

from chronicle.domain.content import FINISHED_STOP_REASONS, Message
from chronicle.domain.context import assemble_context, build_context
from chronicle.projections import ProjectionEngine
from chronicle.projections.history import HistoryProjection
from chronicle.projections.sql import Tx, iso

from .store import ChronicleStore
from .timetravel import Cut, turns_at

#: Turn ids per query on SQLite (far below its parameter limit); PostgreSQL takes them all as
#: one array parameter.
CHUNK = 400
MESSAGES = TypeAdapter(list[Message])
#: Past this many unapplied events, the projection is treated as behind without looking closer.
LAG_LIMIT = 2000


def history_engine(store: ChronicleStore) -> ProjectionEngine:
    """An engine over the history projection alone: a read of the past sets up and moves only it."""
    engine = getattr(store, "_history_engine", None)
    if engine is None:
        engine = ProjectionEngine(store, [HistoryProjection()])
        store._history_engine = engine  # type: ignore[attr-defined]
    return engine


def is_current(store: ChronicleStore, engine: ProjectionEngine, turn_ids: list[UUID] | None = None) -> bool:
    """Whether the history projection has applied every event committed so far of `turn_ids`
    (of every aggregate, if None)."""
    lagging = engine.db.originators_after(engine.position(HistoryProjection.name), LAG_LIMIT)
    if lagging is None:
        return False
    if turn_ids is None:
        return not lagging
    return not set(lagging) & {t.hex for t in turn_ids}


def context_at(store: ChronicleStore, cut: Cut, engine: ProjectionEngine | None = None) -> list[Message]:
    """The messages the model read as of `cut`: from the projection when it has every event of
    the turns in view, else from events."""
    summary, view = cut.session.context_view()
    if engine is not None and is_current(store, engine, view):
        with engine.read() as tx:
            rows = _rows(tx, view, cut)
        # The stored JSON is validated by pydantic-core in one call: parsing it in Python and
        # validating each message took most of a 500-turn read.
        shown = [f'{{"role":"{role}","content":{content}}}'
                 for t in view for role, content in shown_messages(rows.get(str(t), []))]
        return assemble_context([MESSAGES.validate_json("[" + ",".join(shown) + "]")], summary=summary)
    by_id = {turn.id: turn for turn in turns_at(store, cut)}
    return build_context([by_id[t] for t in view], summary=summary)


def _rows(tx: Tx, view: list[UUID], cut: Cut) -> dict[str, list[tuple[Any, ...]]]:
    """Each turn's message rows recorded at or before the cut (or in its transaction), by seq."""
    by_turn: dict[str, list[tuple[Any, ...]]] = {}
    ids = [str(t) for t in view]
    chunk = CHUNK if tx.db.backend == "sqlite" else max(len(ids), 1)
    for start in range(0, len(ids), chunk):
        where, params = tx.any_of("turn_id", ids[start:start + chunk])
        sql = f"SELECT turn_id, seq, step, role, content, stop_reason FROM proj_history_messages WHERE {where}"
        if cut.timestamp is not None:
            # As `turns_as_of` does: events at or before the cut's position, or stamped no later
            # than it (a transaction's events share one timestamp, so it stays whole).
            sql += " AND (position <= %s OR at <= %s)"
            params += [cut.position, iso(cut.timestamp)]
        for row in tx.rows(sql, params):
            by_turn.setdefault(row[0], []).append(row[1:])
    # Ordered here, per turn by seq: `ORDER BY turn_id, seq` made PostgreSQL sort every row by
    # a text column under the database's collation, more than half of the query's time.
    for rows in by_turn.values():
        rows.sort()
    return by_turn


def shown_messages(rows: list[tuple[Any, ...]]) -> list[tuple[str, str]]:
    """(role, content JSON) of what `domain.context.turn_messages` shows of a turn, over its
    projection rows: the input, then each step whose response finished with content, followed
    by its tool results if it has any."""
    messages: list[tuple[str, str]] = []
    shown: set[int] = set()
    for _seq, step, role, content, stop_reason in rows:
        if step is None:
            messages.append(("user", content))
        elif role == "assistant":
            if stop_reason in FINISHED_STOP_REASONS and content != "[]":
                messages.append(("assistant", content))
                shown.add(step)
        elif step in shown and content != "[]":
            messages.append(("user", content))
    return messages
