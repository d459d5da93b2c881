"""`history --at TURN` without rebuilding the session: the branch as of the cut from the projection.

`cut_at_turn` loads the session as of the end of turn TURN to learn which turns were on its
branch then; at 1,000 turns that state (every turn id) costs more than the messages' JSON. A
session whose branch has only ever grown one turn at a time (no undo, redo or compaction, not a
fork: the projection's `reshaped` and `forked_from` say so) had, at any log position, exactly the
turns its branch rows put there by that position, in order. So the cut is the session's TURN-th
`TurnEnded` (one row of `proj_history_turn_ends`), the branch is a prefix of
`proj_history_branch`, and the messages are the spans of its first turns (`proj_history_spans`:
32 ended turns joined as wire text, which such a branch shows unchanged at every later cut) and
`past_context`'s rows of the turns after them, up to the cut: all of it one statement. Any other
session, a projection that has not applied
every event of the session and its turns, or a TurnEnded that names another turn, and this
returns None: the caller takes the general path (`cut_at_turn` + `wire_at`), which is exact for
every case. A display read only: the model's context is always built from events.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from operator import itemgetter
from typing import Any
from uuid import UUID

from pydantic_core import from_json

from chronicle.projections import ProjectionEngine
from chronicle.projections.history import HistoryProjection
from chronicle.projections.sql import Tx
from chronicle.projections.wire_text import Part, Segment, joined, joined_values, segment

from .collector import collector_held
from .past_context import LAG_LIMIT, events_parts, lagging_originators, messages_json
from .store import ChronicleStore


def wire_at_turn(store: ChronicleStore, session_id: UUID, number: int, engine: ProjectionEngine) -> list[dict[str, Any]] | None:
    """The wire messages as of the end of turn `number` of a session whose branch only grew, or
    None when this path cannot say (then `cut_at_turn` + `past_context.wire_at` can)."""
    segments = _segments_at_turn(store, session_id, number, engine, WITH_THE_ROWS)
    return None if segments is None else joined_values(segments, loads)


def loads(text: str) -> Any:
    """Wire JSON as Python values, parsed by pydantic-core (a quarter faster than the standard
    library on a long turn's 350 KB); what it refuses (a lone surrogate escape, which the
    standard library accepts) is parsed the standard way, as the store's transcoder does."""
    with collector_held():
        try:
            return from_json(text, cache_strings="keys")
        except ValueError:
            return json.loads(text)


def text_at_turn(store: ChronicleStore, session_id: UUID, number: int, engine: ProjectionEngine) -> str | None:
    """`wire_at_turn` as one JSON array, undecoded."""
    segments = _segments_at_turn(store, session_id, number, engine, WITH_THE_ROWS)
    return None if segments is None else joined(segments)


#: `_segments_at_turn`'s `lagging` when the projection's lag is to be read in the rows' own statement.
WITH_THE_ROWS: Any = object()


def _segments_at_turn(
    store: ChronicleStore, session_id: UUID, number: int, engine: ProjectionEngine, lagging: list[str] | None
) -> list[Segment | None] | None:
    """`text_at_turn` as the segments `joined` would join (spans, then the rows after them), given
    the projection's lag (`lagging_originators`, read once by a caller that reads twice), or
    `WITH_THE_ROWS` to read it in the rows' statement.

    Every row of the session and its turns up to the cut is there once the lag says the
    projection has applied their events; rows only ever arrive after that, at later positions.
    One statement reads the cut, the shape and the rows (and the lag, `WITH_THE_ROWS`) in one
    snapshot: a transaction would cost PostgreSQL two more round trips. Where a second statement
    is needed (marked turns, or fewer spans than the turn count promises), the shape is read
    again after its rows: `reshaped` is set once and never cleared, so if it is still unset no
    undo had removed a branch row before the rows were read."""
    own_lag = lagging is WITH_THE_ROWS
    if number < 1 or (not own_lag and (lagging is None or session_id.hex in lagging)):
        return None
    sid = str(session_id)
    with engine.db.statement() as tx:
        if not own_lag and lagging:
            # Some aggregates have events the projection has not applied: the cut is read first,
            # so that the branch's turns by then can be checked against them.
            cut = tx.one(CUT, (sid, number))
            if cut is None or _any_lagging(tx, sid, cut[0], set(lagging)):
                return None
        # The cut, the session's shape, the turns marked by the cut, the spans before it and the
        # JSON of every message after them (put together by the database; Python only joins
        # them): one statement, one snapshot. Spans end every `span_turns` turns, so the read
        # knows which to expect, and where the rows after them begin.
        expected = number // HistoryProjection.span_turns * HistoryProjection.span_turns
        params: tuple[Any, ...]
        if not expected:
            statement, params = AS_OF_EARLY_TURN, (sid, number, number - 1, sid, sid, sid)
        else:
            statement, params = AS_OF_TURN, (sid, number, number - 1, sid, sid, sid, number, sid, expected)
        if own_lag:
            lag, lag_params = _lag_rows(engine, "CAST(NULL AS TEXT), 0, 0")
            found = tx.rows(statement + lag, (*params, *lag_params))
            lagging = _lagging_in(found)
            if lagging is None or session_id.hex in lagging:
                return None
        else:
            found = tx.rows(statement, params)
        cut = next(((row[1], row[2], row[3]) for row in found if row[0] == "c"), None)
        if cut is None:
            return None
        position, at, ended_turn = cut
        if own_lag and lagging and _any_lagging(tx, sid, position, set(lagging)):
            return None
        shape = next((tuple(row[1:4]) for row in found if row[0] == "s"), None)
        marked = {int(row[1]): row[2] for row in found if row[0] == "k"}
        spans = _tiled(sorted((row[4], row[5], row[2], row[3]) for row in found if row[0] == "p"))
        covered = spans[-1][1] if spans else 0
        messages = [(row[2], row[3]) for row in sorted((row for row in found if row[0] == "m"), key=_BRANCH_ORDER)]
        # Read again by turn, after fewer spans than expected (a mark stopped them being made) or with
        # turns marked by the cut (attachments, a guardrail's rewrite, a refusal: rare; read from their
        # events): the rows after the spans, then the shape again after them. A span never holds a
        # marked turn; if one seems to, every row is read instead.
        reread = bool(marked) or covered != expected
        if reread:
            if marked and min(marked) < covered:
                spans, covered = [], 0
            rows = tx.rows(
                "SELECT b.idx, m.role, m.wire FROM proj_history_branch b JOIN proj_history_messages m ON m.turn_id = b.turn_id "
                f"WHERE b.session_id = %s AND b.idx >= %s AND b.position <= %s AND {CUT_AND_SENT} ORDER BY b.idx, m.seq",
                (sid, covered, position, position, at),
            )
            shape, marked = _shape_and_marks(tx, sid, number, position, at)
    # Not reshaped, not a fork, and the turn that ended there is the branch's `number`-th.
    if shape != (None, None, ended_turn):
        return None
    before = [Segment(roles.partition(" ")[0], roles.partition(" ")[2], text) for _, _, roles, text in spans]
    if not reread:
        return [*before, segment([messages])]
    from_events = events_parts(store, [UUID(t) for t in marked.values()], position, _timestamp(at))
    parts = _spliced(rows, {idx: from_events.get(t, []) for idx, t in marked.items() if idx >= covered})
    return None if parts is None else [*before, segment(parts)]


def _tiled(spans: list[tuple[int, int, str, str]]) -> list[tuple[int, int, str, str]]:
    """Of spans (first_idx, end_idx, roles, wire) in order, those that cover the branch from its first
    turn without a gap (the projection makes them so, and stops at a turn it cannot join)."""
    tiled: list[tuple[int, int, str, str]] = []
    for span in spans:
        if span[0] != (tiled[-1][1] if tiled else 0):
            break
        tiled.append(span)
    return tiled


def _timestamp(at: str) -> datetime:
    """A projection's `iso` text back as the aware UTC datetime it was written from."""
    return datetime.fromisoformat(at.removesuffix("Z")).replace(tzinfo=timezone.utc)


def _sent_by(position: str, at: str) -> str:
    """A message row recorded by a cut at `position`/`at` (at or before its position, or in its
    transaction), and sent: with the bounds as parameters, or as the `cut` CTE's columns."""
    return f"(m.position <= {position} OR m.at <= {at}) AND m.wire IS NOT NULL AND m.wire <> '[]'"


CUT_AND_SENT = _sent_by("%s", "%s")

#: The session's `number`-th turn end: its log position, time and turn.
CUT = "SELECT position, at, turn_id FROM proj_history_turn_ends WHERE session_id = %s AND ordinal = %s"
#: Everything `history --at TURN` reads, tagged by kind: the cut (`c`), the session's shape as of it
#: (`s`: when first reshaped, what it was forked from, the branch's `number`-th turn), the branch's
#: turns marked by it (`k`, by branch index), the spans of its first turns (`p`: roles, text, first
#: and end index) and the envelopes of the messages after them, in order (`m`).
_SHAPE_AND_MARKS = (
    "SELECT 'c' AS kind, position AS n, at AS t1, turn_id AS t2, CAST(0 AS BIGINT) AS o1, CAST(0 AS BIGINT) AS o2 FROM cut "
    "UNION ALL SELECT 's', s.reshaped, s.forked_from, b.turn_id, 0, 0 FROM cut CROSS JOIN proj_history_sessions s "
    "LEFT JOIN proj_history_branch b ON b.session_id = s.session_id AND b.idx = %s AND b.position <= cut.position "
    "WHERE s.session_id = %s "
    "UNION ALL SELECT DISTINCT 'k', b.idx, k.turn_id, CAST(NULL AS TEXT), 0, 0 FROM cut CROSS JOIN proj_history_branch b "
    "JOIN proj_history_marks k ON k.turn_id = b.turn_id "
    "WHERE b.session_id = %s AND b.position <= cut.position AND (k.position <= cut.position OR k.at <= cut.at) "
)
_SENT_BY_THE_CUT = "AND " + _sent_by("cut.position", "cut.at")
AS_OF_TURN = (
    f"WITH cut AS ({CUT}) {_SHAPE_AND_MARKS}"
    "UNION ALL SELECT 'p', CAST(NULL AS BIGINT), p.roles, p.wire, p.first_idx, p.end_idx FROM proj_history_spans p "
    "WHERE p.session_id = %s AND p.end_idx <= %s "
    "UNION ALL SELECT 'm', CAST(NULL AS BIGINT), m.role, m.wire, b.idx, m.seq FROM cut "
    "CROSS JOIN proj_history_branch b JOIN proj_history_messages m ON m.turn_id = b.turn_id "
    f"WHERE b.session_id = %s AND b.idx >= %s AND b.position <= cut.position {_SENT_BY_THE_CUT}"
)
#: `AS_OF_TURN` for a turn before the end of the first span: no span to read, so a statement with
#: two tables fewer to plan (most of an early turn's read on an open PostgreSQL store).
AS_OF_EARLY_TURN = (
    f"WITH cut AS ({CUT}) {_SHAPE_AND_MARKS}"
    "UNION ALL SELECT 'm', CAST(NULL AS BIGINT), m.role, m.wire, b.idx, m.seq FROM cut "
    "CROSS JOIN proj_history_branch b JOIN proj_history_messages m ON m.turn_id = b.turn_id "
    f"WHERE b.session_id = %s AND b.position <= cut.position {_SENT_BY_THE_CUT}"
)


#: A message's place in `AS_OF_TURN`'s answer: its turn's branch index, then its number in the
#: turn. Sorted here, not by the statement: SQLite would sort the whole union where reading each
#: part in index order costs nothing.
_BRANCH_ORDER = itemgetter(4, 5)


def _shape_and_marks(tx: Tx, sid: str, number: int, position: int, at: str) -> tuple[tuple[Any, ...] | None, dict[int, str]]:
    """In one statement (a round trip on PostgreSQL): the session's shape as of the cut (when it
    was first reshaped, what it was forked from, the branch's `number`-th turn) and the branch's
    turns marked by the cut, by branch index. Marks by the cut never change once the projection
    has applied it, so they may be read after the rows; the shape must be."""
    found = tx.rows(
        "SELECT 'shape', s.reshaped, s.forked_from, b.turn_id FROM proj_history_sessions s LEFT JOIN proj_history_branch b "
        "ON b.session_id = s.session_id AND b.idx = %s AND b.position <= %s WHERE s.session_id = %s "
        "UNION ALL SELECT DISTINCT 'mark', CAST(NULL AS BIGINT), CAST(b.idx AS TEXT), k.turn_id FROM proj_history_branch b "
        "JOIN proj_history_marks k ON k.turn_id = b.turn_id "
        "WHERE b.session_id = %s AND b.position <= %s AND (k.position <= %s OR k.at <= %s)",
        (number - 1, position, sid, sid, position, position, at),
    )
    shape = next((tuple(row[1:]) for row in found if row[0] == "shape"), None)
    return shape, {int(row[2]): row[3] for row in found if row[0] == "mark"}


def _lag_rows(engine: ProjectionEngine, rest: str) -> tuple[str, tuple[Any, ...]]:
    """The projection's lag (`lagging_originators`) as rows to UNION ALL onto a read whose rows
    are tagged by kind: kind 'l', no position, the aggregate's id third, then `rest` (NULLs or
    zeros for the read's further columns). (SQL, params): the lag is read in the read's snapshot."""
    return (
        " UNION ALL SELECT 'l', CAST(NULL AS BIGINT), CAST(lag.originator_id AS TEXT), "
        f"{rest} FROM ({engine.db.originators_after_tracked_sql()}) lag",
        (engine.projections[HistoryProjection.name].key, LAG_LIMIT + 1),
    )


def _lagging_in(found: list[tuple[Any, ...]]) -> list[str] | None:
    """The lag among rows read with `_lag_rows`, as `lagging_originators` gives it: hex ids, or
    None when more than LAG_LIMIT events are waiting."""
    lagging = [row[2].replace("-", "") for row in found if row[0] == "l"]
    return None if len(lagging) > LAG_LIMIT else lagging


def _any_lagging(tx: Tx, sid: str, position: int, lagging: set[str]) -> bool:
    """Whether any turn on the branch by the cut has events the projection has not applied."""
    turns = tx.rows("SELECT turn_id FROM proj_history_branch WHERE session_id = %s AND position <= %s", (sid, position))
    return any(t.replace("-", "") in lagging for (t,) in turns)


def _spliced(rows: list[tuple[Any, ...]], replaced: dict[int, list[Part]]) -> list[list[Part]] | None:
    """The rows' messages turn by turn, a marked turn's from its events instead; None if a marked
    turn has no row to stand in for (its input is always one, so not expected)."""
    parts: list[list[Part]] = []
    done: set[int] = set()
    for idx, role, wire in rows:
        if idx not in replaced:
            parts.append([(role, wire)])
        elif idx not in done:
            done.add(idx)
            parts.append(replaced[idx])
    return parts if len(done) == len(replaced) else None


def wire_at_step(store: ChronicleStore, session_id: UUID, number: int, step: int, engine: ProjectionEngine) -> list[dict[str, Any]] | None:
    """What the model was sent for step `step` of turn `number` (`history --at N --step K`), for a
    session whose branch only grew: the conversation as of the end of turn `number - 1`
    (`text_at_turn`), then the turn's own rows up to its last event before that step's answer
    (`turn_text_at`). Nothing reshaped the branch and no summary was made, so nothing else was
    sent. None when this path cannot say (then `cut_at_step` + `past_context.wire_at` can)."""
    from .timetravel import step_answer

    if number < 1:
        return None
    lagging = lagging_originators(engine)
    if lagging is None or session_id.hex in lagging:
        return None
    # The turn must have ended, as `cut_at_turn` requires (a running turn is read from events).
    with engine.db.statement() as tx:
        found = tx.one(
            "SELECT b.turn_id, s.reshaped, s.forked_from FROM proj_history_sessions s JOIN proj_history_branch b "
            "ON b.session_id = s.session_id AND b.idx = %s JOIN proj_history_turns t ON t.turn_id = b.turn_id "
            "WHERE s.session_id = %s AND t.status IN ('completed', 'failed', 'cancelled', 'stopped')",
            (number - 1, str(session_id)),
        )
    if found is None or found[1] is not None or found[2] is not None:
        return None
    turn_id = UUID(found[0])
    answered = step_answer(store, turn_id, step)
    if answered is None:
        return None
    # The lag read above still holds: events the projection applied after it only add rows at
    # later positions, beyond both cuts.
    own = _turn_text_at(turn_id, answered.originator_version - 1, engine, lagging)
    before = _segments_at_turn(store, session_id, number - 1, engine, lagging) if number > 1 else []
    if own is None or before is None:
        return None
    messages, mine = joined_values(before, loads), loads(own)
    if messages and mine and messages[-1]["role"] == mine[0]["role"]:  # as `merge_roles` joins them
        messages[-1]["content"].extend(mine.pop(0)["content"])
    return messages + mine


def turn_wire_at(store: ChronicleStore, turn_id: UUID, version: int, engine: ProjectionEngine) -> list[dict[str, Any]] | None:
    """What the model read of one turn as its `version`-th event left it (`build_context([store.turn(
    turn_id, version=version)])` as wire dicts), from the turn's projection rows: a turn's events up
    to a version are exactly its rows recorded at or before that event's log position, one indexed
    lookup away. Reading the Turn itself replays every event after its newest snapshot at or below
    the version (only the newest is kept: runtime/store_snapshots.py), ≈ 1,000 events in the middle of a
    2,000-event turn. None when the rows cannot say: the projection has not applied the turn, or
    the turn is marked by then (attachments, a guardrail's rewrite, a refusal)."""
    text = turn_text_at(store, turn_id, version, engine)
    return None if text is None else loads(text)


def turn_text_at(store: ChronicleStore, turn_id: UUID, version: int, engine: ProjectionEngine) -> str | None:
    """`turn_wire_at` as one JSON array, undecoded."""
    return _turn_text_at(turn_id, version, engine, WITH_THE_ROWS)


def _turn_text_at(turn_id: UUID, version: int, engine: ProjectionEngine, lagging: list[str] | None) -> str | None:
    """`turn_text_at` given the projection's lag (read once by a caller that reads twice), or
    `WITH_THE_ROWS` to read it in the rows' statement.

    One statement: the log position of the turn's `version`-th event (the cut), the turn's rows
    up to it and, `WITH_THE_ROWS`, the lag. The three were a statement each, which on a server
    process just started (a CLI command's) are each parsed and planned anew. No message rows at
    all when the turn is marked by then (its input is always a row) or has no such version: then
    the caller reads the Turn."""
    own_lag = lagging is WITH_THE_ROWS
    if not own_lag and (lagging is None or turn_id.hex in lagging):
        return None
    db, tid = engine.db, str(turn_id)
    statement = (
        f"WITH cut AS (SELECT {db.position_column} AS position FROM {db.events_table} "
        "WHERE originator_id = %s AND originator_version = %s) "
        "SELECT 'm' AS kind, m.position AS n, m.role AS role, m.wire AS wire FROM cut CROSS JOIN proj_history_messages m "
        "WHERE m.turn_id = %s AND m.position <= cut.position AND m.wire IS NOT NULL AND m.wire <> '[]' "
        "AND NOT EXISTS (SELECT 1 FROM proj_history_marks k WHERE k.turn_id = %s AND k.position <= cut.position)"
    )
    params: tuple[Any, ...] = (turn_id.hex if db.backend == "sqlite" else turn_id, version, tid, tid)
    if own_lag:
        lag, lag_params = _lag_rows(engine, "CAST(NULL AS TEXT)")
        statement, params = statement + lag, params + lag_params
    with db.statement() as tx:
        found = tx.rows(statement + " ORDER BY 1, 2", params)  # the lag ("l") first, then the rows by position
    if own_lag:
        lagging = _lagging_in(found)
        if lagging is None or turn_id.hex in lagging:
            return None
    messages = [(row[2], row[3]) for row in found if row[0] == "m"]  # one row per event
    return messages_json(None, [messages]) if messages else None
