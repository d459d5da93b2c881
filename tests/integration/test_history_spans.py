"""`history --at TURN` reads a long session's first turns from spans (whole turns joined as wire
text, 32 at a time) and only the turns after them row by row, and shows exactly what the
events show, on both backends: across span boundaries where one turn's last message and the
next turn's first share a role, where a mark stops spans being made, and after an undo.
"""

from __future__ import annotations

from uuid import UUID

from chronicle.projections import ProjectionEngine
from chronicle.projections.history import HistoryProjection
from chronicle.runtime.past_context import history_engine
from chronicle.runtime.past_wire import wire_at_turn
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.timetravel import as_of_turn
from tests.helpers import response, text, tool_use

from .test_history_wire import IMAGE, Builder, oracle, printed

SPAN = HistoryProjection.span_turns


def long_session(b: Builder, turns: int, failing: set[int] = frozenset(), attached: set[int] = frozenset()) -> UUID:  # type: ignore[assignment]
    """`turns` turns: every third with a tool step; those in `failing` fail (their input merges with
    the next turn's input), those in `attached` carry an image (a marked turn)."""
    sid = b.session()
    for n in range(1, turns + 1):
        if n in failing:
            b.turn(sid, f"turn {n} fails", [(response(stop="error"), None)], fail=True)
        elif n % 3 == 0:
            b.turn(sid, f"turn {n}", [
                (response(text(""), tool_use(f"tu_{n}", "read_file", path=f"{n}.txt")), [(f"tu_{n}", f"file {n}", False)]),
                (response(text(f"read {n}")), None),
            ], attachments=[IMAGE] if n in attached else None)
        else:
            b.turn(sid, f"turn {n}", [(response(text(f"answer {n}")), None)], attachments=[IMAGE] if n in attached else None)
    return sid


def spans(engine: ProjectionEngine, sid: UUID) -> list[tuple[int, int]]:
    with engine.db.statement() as tx:
        return sorted(tx.rows("SELECT first_idx, end_idx FROM proj_history_spans WHERE session_id = %s", (str(sid),)))


def agrees_at_every_turn(store: ChronicleStore, sid: UUID, turns: int) -> None:
    engine = history_engine(store)
    for n in range(1, turns + 1):
        fast = wire_at_turn(store, sid, n, engine)
        assert fast is not None and printed(fast) == printed(oracle(as_of_turn(store, sid, n))), n


def test_spans_are_read_for_the_first_turns_and_agree_with_the_events_at_every_turn(db_url):
    store = ChronicleStore(db_url)
    b = Builder(store)
    turns = 2 * SPAN + 6
    # The last turn of the first span fails: its input and the next span's first input are one
    # message, merged across the boundary; so is the last turn of the second span with the rows after it.
    sid = long_session(b, turns, failing={SPAN, 2 * SPAN})
    history_engine(store).catch_up()
    engine = history_engine(store)
    assert spans(engine, sid) == [(0, SPAN), (SPAN, 2 * SPAN)]
    agrees_at_every_turn(store, sid, turns)
    merged = wire_at_turn(store, sid, SPAN + 1, engine)
    assert merged is not None
    assert [f"turn {SPAN} fails", f"turn {SPAN + 1}"] in [[block.get("text") for block in m["content"]] for m in merged]

    # The spans are what is read for those turns: with their rows gone the answer stands.
    expected = printed(oracle(as_of_turn(store, sid, turns)))
    with engine.db.transaction() as tx:
        tx.execute("DELETE FROM proj_history_messages WHERE turn_id IN (SELECT turn_id FROM proj_history_branch "
                   "WHERE session_id = %s AND idx < %s)", (str(sid), 2 * SPAN))
    assert printed(wire_at_turn(store, sid, turns, engine) or []) == expected
    store.close()


def test_a_marked_turn_stops_spans_from_its_span_on_and_the_reads_still_agree(db_url):
    store = ChronicleStore(db_url)
    b = Builder(store)
    turns = 3 * SPAN + 1
    sid = long_session(b, turns, attached={SPAN + 5})  # an image in the second span's turns
    early = long_session(b, SPAN + 1, attached={1})
    history_engine(store).catch_up()
    engine = history_engine(store)
    assert spans(engine, sid) == [(0, SPAN)]  # not the second (marked), nor the third (not after a span)
    assert spans(engine, early) == []
    for n in (SPAN - 1, SPAN, SPAN + 5, 2 * SPAN + 1, turns):
        fast = wire_at_turn(store, sid, n, engine)
        assert fast is not None and printed(fast) == printed(oracle(as_of_turn(store, sid, n))), n
    assert printed(wire_at_turn(store, early, SPAN + 1, engine) or []) == printed(oracle(as_of_turn(store, early, SPAN + 1)))
    store.close()


def test_after_an_undo_the_spans_are_not_read_and_a_rebuild_makes_the_same(db_url):
    store = ChronicleStore(db_url)
    b = Builder(store)
    sid = long_session(b, SPAN + 2)
    engine = history_engine(store)
    engine.catch_up()
    store.update_session(sid, lambda s: s.undo(2, b.now()))
    b.turn(sid, "after the undo", [(response(text("again")), None)])
    engine.catch_up()
    assert wire_at_turn(store, sid, SPAN, engine) is None  # reshaped: the general path answers
    incremental = engine.dump("history")
    engine.rebuild()
    assert engine.dump("history") == incremental and incremental["proj_history_spans"]
    store.close()
