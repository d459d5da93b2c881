"""The conversation as of a point in the past, read from the history projection by index.

Rebuilding the past from events decodes every event of every turn on the branch up to the
cut (≈ 80 ms at 500 turns). The history projection already holds every turn's messages,
decoded and numbered, and each row carries the log position of the event that recorded it,
so the conversation at a cut is one indexed query per few hundred turns plus the parse of
the messages it returns. Each row holds its blocks as the model is sent them (`wire`,
normalised once by the projection), so a display read decodes JSON and builds no pydantic
model (`wire_at`); `context_at` validates the same text into `Message`s. A turn whose messages
the rows cannot show alone (attachments, a guardrail's rewrite, a refusal: `proj_history_marks`) is read
from its events, as is everything when the projection is behind.

This is a read path for showing the past (`history --at/--version`), never the model's
context for continuing a session: that is always built from events. The projection is used
only when it has applied every event of the turns it is asked about (a row it has not written
yet would be silently missing): the ids of the events after its position are checked against
those turns, so writes to other sessions, or later turns of this one, do not stop it from
answering. Otherwise the past is rebuilt from events, exactly as before.
"""

from __future__ import annotations

import json
from typing import Any, Iterable
from uuid import UUID

from pydantic import ConfigDict, TypeAdapter

from chronicle.domain.content import Message, TextBlock
from chronicle.domain.context import build_context, turn_messages
from chronicle.projections import ProjectionEngine
from chronicle.projections.history import HistoryProjection, wire_of
from chronicle.projections.sql import Tx, dumps, iso
from chronicle.projections.wire_text import Part, segment, shown_messages

from .collector import collector_held
from .store import ChronicleStore
from .timetravel import Cut, turns_as_of, turns_at

#: Turn ids per query on SQLite (far below its parameter limit); PostgreSQL takes them all as
#: one array parameter.
CHUNK = 400
MESSAGES = TypeAdapter(list[Message], config=ConfigDict(defer_build=True))  # built when `context_at` first validates
#: Past this many unapplied events, the projection is treated as behind without looking closer.
LAG_LIMIT = 2000


def history_engine(store: ChronicleStore) -> ProjectionEngine:
    """An engine over the history projection alone: a read of the past sets up and moves only it."""
    engine = getattr(store, "_history_engine", None)
    if engine is None:
        engine = ProjectionEngine(store, [HistoryProjection()])
        store._history_engine = engine  # type: ignore[attr-defined]
    return engine


def is_current(store: ChronicleStore, engine: ProjectionEngine, turn_ids: Iterable[UUID | str] | None = None) -> bool:
    """Whether the history projection has applied every event committed so far of `turn_ids`
    (of every aggregate, if None); ids as UUIDs or their hex."""
    lagging = lagging_originators(engine)
    if lagging is None:
        return False
    if turn_ids is None:
        return not lagging
    return not set(lagging) & {t.hex if isinstance(t, UUID) else t for t in turn_ids}


def lagging_originators(engine: ProjectionEngine) -> list[str] | None:
    """The aggregates (hex ids) with events the history projection has not applied; None if
    more than LAG_LIMIT events are waiting."""
    return engine.db.originators_after_tracked(engine.projections[HistoryProjection.name].key, LAG_LIMIT)


def context_at(store: ChronicleStore, cut: Cut, engine: ProjectionEngine | None = None) -> list[Message]:
    """The messages the model read as of `cut`: from the projection when it has every event of
    the turns in view, else from events."""
    text = _projected(store, cut, engine)
    if text is not None:
        # The stored JSON is validated by pydantic-core in one call: parsing it in Python and
        # validating each message took most of a 500-turn read.
        with collector_held():
            return MESSAGES.validate_json(text)
    summary, view = cut.session.context_view()
    by_id = {turn.id: turn for turn in turns_at(store, cut)}
    return build_context([by_id[t] for t in view], summary=summary)


def wire_at(store: ChronicleStore, cut: Cut, engine: ProjectionEngine | None = None) -> list[dict[str, Any]]:
    """`[m.wire() for m in context_at(...)]`, without building a `Message` when the projection
    can answer: what `history --at/--version --json` prints."""
    text = _projected(store, cut, engine)
    if text is not None:
        with collector_held():
            return json.loads(text)
    return [m.wire() for m in context_at(store, cut)]


def _projected(store: ChronicleStore, cut: Cut, engine: ProjectionEngine | None) -> str | None:
    """The conversation at `cut` as one JSON array of wire messages, or None when the projection
    has not applied every event of the turns in view."""
    summary, view = cut.session.context_view()
    if engine is None or not is_current(store, engine, view):
        return None
    ids = [str(t) for t in view]
    with engine.read() as tx:
        rows = _rows(tx, ids, cut.position, cut.timestamp)
        marked = marked_turns(tx, ids, cut.position, cut.timestamp)
    from_events = events_parts(store, [t for t in view if str(t) in marked], cut.position, cut.timestamp)
    parts = (from_events[t] if t in from_events else shown_messages(rows.get(t, [])) for t in ids)
    return messages_json(summary, parts)


def _cut_sql(cut_position: int, cut_timestamp: Any, prefix: str = "") -> tuple[str, list[Any]]:
    """Rows recorded at or before the cut, as `turns_as_of` folds events: at or before its
    position, or stamped no later than it (a transaction's events share one timestamp, so it stays whole)."""
    if cut_timestamp is None:
        return "", []
    return f" AND ({prefix}position <= %s OR {prefix}at <= %s)", [cut_position, iso(cut_timestamp)]


def _rows(tx: Tx, ids: list[str], cut_position: int, cut_timestamp: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Each turn's message rows recorded at or before the cut (or in its transaction), by seq."""
    by_turn: dict[str, list[tuple[Any, ...]]] = {}
    chunk = CHUNK if tx.db.backend == "sqlite" else max(len(ids), 1)
    cut_where, cut_params = _cut_sql(cut_position, cut_timestamp)
    for start in range(0, len(ids), chunk):
        where, params = tx.any_of("turn_id", ids[start:start + chunk])
        sql = f"SELECT turn_id, seq, step, role, stop_reason, wire FROM proj_history_messages WHERE {where}{cut_where}"
        for row in tx.rows(sql, params + cut_params):
            by_turn.setdefault(row[0], []).append(row[1:])
    # Ordered here, per turn by seq: `ORDER BY turn_id, seq` made PostgreSQL sort every row by
    # a text column under the database's collation, more than half of the query's time.
    for rows in by_turn.values():
        rows.sort()
    return by_turn


def marked_turns(tx: Tx, ids: list[str], cut_position: int, cut_timestamp: Any) -> set[str]:
    """Of these turns, those with attachments, a guardrail's rewrite or a refusal recorded by the cut."""
    found: set[str] = set()
    chunk = CHUNK if tx.db.backend == "sqlite" else max(len(ids), 1)
    cut_where, cut_params = _cut_sql(cut_position, cut_timestamp)
    for start in range(0, len(ids), chunk):
        where, params = tx.any_of("turn_id", ids[start:start + chunk])
        found.update(r[0] for r in tx.rows(f"SELECT turn_id FROM proj_history_marks WHERE {where}{cut_where}", params + cut_params))
    return found


def events_parts(store: ChronicleStore, turn_ids: list[UUID], cut_position: int, cut_timestamp: Any) -> dict[str, list[Part]]:
    """The messages of these turns as of the cut, rebuilt from their events (the marked ones)."""
    if not turn_ids:
        return {}
    turns = store.turns(turn_ids) if cut_timestamp is None else turns_as_of(store, turn_ids, cut_position, cut_timestamp)
    return {str(t.id): [(m.role, dumps(m.wire()["content"], sort_keys=False)) for m in turn_messages(t)] for t in turns}


def messages_json(summary: str | None, parts: Iterable[list[Part]]) -> str:
    """One JSON array of wire messages, as `domain.context.assemble_context` builds them: the
    summary first, then each turn's messages, consecutive messages of one role merged."""
    summary_wire = wire_of([TextBlock(text=f"Summary of the conversation so far:\n{summary}")]) if summary else None
    found = segment(parts, summary_wire)
    return "[]" if found is None else found.text
