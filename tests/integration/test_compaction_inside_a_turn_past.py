"""A compaction the loop makes inside a turn (between one step's results and the next call), read back.

The older turns are summarised mid-turn: `Session.Compacted` is recorded after the turn's last event
before the next answer. `history --at T --step K` and `why` must show what that call was sent (the
summary, not the turns it replaced), from the history projection's rows and from events alike; a fork's
own turn that compacted, and a fork that inherited the compacted turn, too. `replay` of such forks must
be identical: the parent's compaction inside an inherited turn is made again there, and the fork's own
compaction names the replay's turns. The oracle is the provider's record of every request it answered.
"""

from __future__ import annotations

import asyncio
from typing import Any

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.app import queries
from chronicle.runtime.app.replay import replay
from chronicle.runtime.app.why import why
from chronicle.runtime.compaction import CompactionSettings
from chronicle.runtime.past_context import context_at, history_engine, wire_at
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.timetravel import cut_at_step, fork

from .test_turn_compaction import LongTurnProvider, make_loop


def _sent(provider: LongTurnProvider, sid: Any) -> dict[tuple[int, int], list[dict[str, Any]]]:
    """What each model call of the session was sent, by (turn number as the request named it, call index)."""
    return {(r.turn_number, r.call_index): [m.wire() for m in r.messages] for r in provider.requests if r.session_id == str(sid)}


def _compacting_session(db_url: str, workspace: Any) -> tuple[Any, Any, LongTurnProvider, Any]:
    """Turn 1 is long; turn 2 reads big.txt three times, and its older turn is summarised before its third call."""
    provider = LongTurnProvider(calls=0)
    loop, store, _ = make_loop(db_url, workspace, provider, CompactionSettings(context_window=2000, keep_recent=5))
    session, _ = start_session(store, AgentSpec(tools=("read_file",)), "first " + "x" * 4000)
    assert asyncio.run(loop.run_next(session.id)).status == "completed"
    provider.calls = 3
    submit_input(store, session.id, "second")
    assert asyncio.run(loop.run_next(session.id)).status == "completed"
    return loop, store, provider, session.id


def _assert_shown_as_sent(store: Any, sid: Any, sent: dict[tuple[int, int], list[dict[str, Any]]]) -> None:
    engine = history_engine(store)
    engine.catch_up()
    for (turn, step), messages in sent.items():
        assert queries.history(store, sid, at=turn, step=step) == messages, (turn, step)
        cut = cut_at_step(store, sid, turn, step)
        assert wire_at(store, cut, engine) == messages, (turn, step)  # the projection's rows
        assert [m.wire() for m in context_at(store, cut)] == messages, (turn, step)  # events, without the projection


def test_history_and_why_show_the_summary_a_call_inside_the_turn_was_sent(db_url, workspace):
    loop, store, provider, sid = _compacting_session(db_url, workspace)
    log = queries.log(store, sid)
    compacted = [e for e in log if e["event"] == "Compacted"]
    answers = [e for e in log if e["event"] == "ModelResponded"]
    assert len(compacted) == 1 and len(answers) == 5
    # Made inside turn 2, after its second step's results and before its third call: what the case is about.
    assert answers[2]["position"] < compacted[0]["position"] < answers[3]["position"]
    sent = _sent(provider, sid)
    assert "x" * 100 in str(sent[(2, 1)]) and len(sent[(2, 1)]) == 5  # turn 1's messages, then the turn's own
    assert "Summary of the conversation" in str(sent[(2, 2)][0]) and "x" * 100 not in str(sent[(2, 2)])
    _assert_shown_as_sent(store, sid, sent)
    explained = why(store, sid, "tu_2")  # the call decided at turn 2's step 2
    assert (explained["turn"], explained["step"]) == (2, 2)
    assert explained["saw"]["messages"] == len(sent[(2, 2)])

    # A fork from before the compaction whose own turn compacted the inherited one, and a fork made after it that
    # inherited the turn it was made in: each call shown as it was sent, an inherited one as its parent sent it.
    early = fork(store, sid, 1)
    submit_input(store, early.id, "second, forked")
    assert asyncio.run(loop.run_next(early.id)).status == "completed"
    late = fork(store, sid, 2, present=store.session(sid))
    provider.calls = 0
    submit_input(store, late.id, "third")
    assert asyncio.run(loop.run_next(late.id)).status == "completed"
    own = _sent(provider, early.id)
    assert len(own) == 4 and "Summary of the conversation" in str(own[(2, 2)][0])
    assert [e["event"] for e in queries.log(store, early.id)].count("Compacted") == 1  # the fork's own, inside its turn
    _assert_shown_as_sent(store, early.id, own)
    inherited = {key: messages for key, messages in sent.items() if key[0] <= 2}
    _assert_shown_as_sent(store, late.id, {**inherited, **_sent(provider, late.id)})


def test_replay_of_a_fork_places_the_parents_compaction_and_its_own(db_url, workspace):
    loop, store, provider, sid = _compacting_session(db_url, workspace)
    early = fork(store, sid, 1)  # before the compaction: its own turn compacts the inherited one
    submit_input(store, early.id, "second, forked")
    assert asyncio.run(loop.run_next(early.id)).status == "completed"
    late = fork(store, sid, 2, present=store.session(sid))  # after it: turn 2, inherited, was compacted inside
    provider.calls = 0
    submit_input(store, late.id, "third")
    assert asyncio.run(loop.run_next(late.id)).status == "completed"
    for session_id in (sid, early.id, late.id):
        report = asyncio.run(replay(store, session_id, workspace))
        assert report.identical, (session_id, report.verdict())
        assert report.model_calls == {sid: 5, early.id: 5, late.id: 6}[session_id]
