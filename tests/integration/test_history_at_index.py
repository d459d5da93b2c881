"""`history --at/--version` read from the history projection equal the conversation rebuilt from events.

The oracle is the event path (`as_of_turn` / `as_of_version` folding every turn's events up to
the cut, then `build_context`), on the same store, for every turn and every session version of
every session: forks, sub-agents, failures, approvals, undo/redo and a compaction included.
"""

from __future__ import annotations

import asyncio
from typing import Any
from uuid import UUID

from chronicle.domain.context import build_context
from chronicle.runtime.past_context import context_at, history_engine, is_current
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.timetravel import as_of_turn, as_of_version, cut_at_turn, cut_at_version, fork
from tests.helpers import response, text, tool_use

from .loop_harness import Harness
from .projection_run import MixedRun


def oracle(view: Any) -> list[dict[str, Any]]:
    summary, ids = view.session.context_view()
    by_id = {t.id: t for t in view.turns}
    return [m.wire() for m in build_context([by_id[t] for t in ids], summary=summary)]


def indexed(store: ChronicleStore, cut: Any) -> list[dict[str, Any]]:
    return [m.wire() for m in context_at(store, cut, history_engine(store))]


def every_moment(store: ChronicleStore, sid: UUID) -> list[tuple[str, int, Any, list[dict[str, Any]]]]:
    """(kind, n, cut, oracle messages) for every turn and every version of the session."""
    session = store.session(sid)
    moments = []
    turns = len(store.session(sid, version=1).head) + len(session.turns) if session.forked_from else len(session.turns)
    for n in range(1, turns + 1):
        try:
            moments.append(("turn", n, cut_at_turn(store, sid, n), oracle(as_of_turn(store, sid, n))))
        except ValueError:  # a turn that has not ended (awaiting approval): no moment to show
            pass
    for v in range(1, session.version + 1):
        moments.append(("version", v, cut_at_version(store, sid, v), oracle(as_of_version(store, sid, v))))
    return moments


def test_history_as_of_every_turn_and_version_equals_the_event_rebuild(db_url, tmp_path, workspace):
    store = ChronicleStore(db_url)
    run = MixedRun(store, tmp_path, workspace)  # projections are not kept current during the run
    asyncio.run(run.run())
    engine = history_engine(store)
    moments = [(sid, *m) for sid in run.sessions.values() for m in every_moment(store, sid)]
    assert len(moments) > 40 and any(m[-1] for m in moments)

    # The projection lags behind the log: every read falls back to events, and still agrees.
    assert not is_current(store, engine)
    for sid, kind, n, cut, expected in moments:
        assert indexed(store, cut) == expected, (sid, kind, n)

    engine.catch_up()
    assert is_current(store, engine)
    for sid, kind, n, cut, expected in moments:
        assert indexed(store, cut) == expected, (sid, kind, n)
    store.close()


def test_history_as_of_a_fork_a_compaction_and_an_undo_equals_the_event_rebuild(db_url, workspace, tmp_path):
    turn = [response(text("reading"), tool_use("tu_1", "read_file", path="hello.txt")), response(text("done"))]
    h = Harness(db_url, workspace, tmp_path, [turn, turn, turn, turn, turn], auto_approve=True)
    for prompt in ("one", "two", "three"):
        assert h.run(prompt).status == "completed"
    store = h.store
    sid = h.session_id
    first = store.session(sid).head[0]
    store.update_session(sid, lambda s: s.compact([first], "they said one", "summary", s.created_at))
    assert h.run("four").status == "completed"
    child = fork(store, sid, 3)
    store.update_session(sid, lambda s: s.undo(1, s.created_at))

    engine = history_engine(store)
    engine.catch_up()
    for session_id in (sid, child.id):
        moments = every_moment(store, session_id)
        assert any(kind == "version" and msgs and "Summary of the conversation" in str(msgs[0]) for kind, _, _, msgs in moments) \
            or session_id == child.id
        for kind, n, cut, expected in moments:
            assert is_current(store, engine)
            assert indexed(store, cut) == expected, (session_id, kind, n)
    # The fork's branch is its parent's as of turn 3, referenced rather than copied.
    assert store.session(child.id).head == cut_at_turn(store, sid, 3).session.head
    h.store.close()
