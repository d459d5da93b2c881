"""The display read of the past (`history --at/--version --json`) from the history projection's wire rows
equals the conversation rebuilt from events, byte for byte as the CLI prints it, on both backends.

The oracle is the event path (`as_of_turn` / `as_of_version`, then `build_context`, then `wire()`).
The sessions cover what the rows alone cannot show (attachments, a guardrail's rewrite of the input
and of the answer, a refusal: read from events) and what they show by rule (a response that did
not finish, a cut tool input and its results, an empty text block, a tool error, a failed turn whose
input merges with the next one), plus the mixed run's forks, sub-agents, approvals and failures,
and undo, redo and compaction (the general path: `cut_at_turn` + `wire_at`).
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta, timezone
from typing import Any
from uuid import UUID, uuid4

from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.content import ModelResponse, ToolResultBlock
from chronicle.domain.context import build_context
from chronicle.domain.session import Session
from chronicle.domain.turn import Turn
from chronicle.projections import ProjectionEngine
from chronicle.projections.history import HistoryProjection
from chronicle.runtime.app import queries
from chronicle.runtime.guardrails import mark
from chronicle.runtime.past_context import history_engine, is_current, lagging_originators, wire_at
from chronicle.runtime.past_wire import wire_at_turn
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.timetravel import as_of_turn, as_of_version, cut_at_turn, cut_at_version, fork
from tests.helpers import response, text, tool_use

from .projection_run import MixedRun

IMAGE = {"type": "image", "source": {"type": "chronicle_attachment", "sha256": "ab" * 32, "media_type": "image/png"}}


class Builder:
    """Turns recorded through the domain's own commands, each fact saved as the loop saves it."""

    def __init__(self, store: ChronicleStore) -> None:
        self.store = store
        self.t = datetime(2026, 3, 1, tzinfo=timezone.utc)

    def now(self) -> datetime:
        self.t += timedelta(seconds=1)
        return self.t

    def session(self) -> UUID:
        sid = uuid4()
        self.store.create_session(Session.start(sid, AgentSpec(name="main", model="m"), self.now()))
        return sid

    def turn(self, sid: UUID, prompt: str, steps: list[tuple[dict[str, Any], list[tuple[str, str, bool]] | None]], *,
             attachments: list[dict[str, Any]] | None = None, inbound: str | None = None, answer: str | None = None,
             fail: bool = False) -> UUID:
        input_id = uuid4().hex
        self.store.update_session(sid, lambda s: s.queue_input(input_id, prompt, self.now()))
        number = len(self.store.session(sid).turns) + 1
        turn = Turn(id=uuid4(), session_id=sid, input_id=input_id, number=number, input_text=prompt, agent="main",
                    timestamp=self.now())
        if attachments:
            turn.reference_attachments(attachments, self.now())
        turn.start(self.now())
        self.store.update_session(sid, lambda s: s.start_turn(turn.id, self.now()), turn)
        if inbound is not None:
            turn.record_guardrail(mark("pseudonymise", "inbound", prompt, inbound), inbound, self.now())
            self.store.save(turn)
        for reply, results in steps:
            turn.record_response(ModelResponse.model_validate(reply), self.now())
            self.store.save(turn)
            if results is not None:
                blocks = [ToolResultBlock(tool_use_id=i, content=c, is_error=e) for i, c, e in results]
                turn.record_tool_results(blocks, self.now())
                self.store.save(turn)
        if answer is not None:
            turn.record_guardrail(mark("pseudonymise", "final", "the model's answer", answer), answer, self.now())
        if fail:
            turn.fail("the provider failed", self.now())
        else:
            turn.complete(self.now())
        self.store.save(turn)
        self.store.update_session(sid, lambda s: s.end_turn(turn.id, self.now()))
        return turn.id


def awkward_session(b: Builder) -> UUID:
    """One session whose branch only grew, with every case the rows show by rule or leave to events."""
    sid = b.session()
    b.turn(sid, "look at this", [(response(text("An image.")), None)], attachments=[IMAGE])
    b.turn(sid, "I am Alexandra", [(response(text("Hello A.")), None)], inbound="I am A.")
    b.turn(sid, "tools please", [
        (response(text(""), tool_use("tu_1", "read_file", path="a.txt")), [("tu_1", "no such file", True)]),
        (response(text("It is missing.")), None),
    ])
    b.turn(sid, "say Alexandra", [(response(text("Alexandra!")), None)], answer="A.!")
    b.turn(sid, "something bad", [(response(text("I can't help with that."), stop="refusal"), None)])
    cut_input = {**tool_use("tu_2", "write_file", path="b.txt"), "partial_input_json": '{"path": "b'}
    b.turn(sid, "write it", [
        (response(text("Writing."), cut_input, stop="max_tokens"), [("tu_2", "the input was cut off", True)]),
        (response(text("Could not.")), None),
    ])
    b.turn(sid, "this fails", [(response(stop="error"), None)], fail=True)
    b.turn(sid, "after the failure", [(response(text("Fine.")), None)])
    b.turn(sid, "last", [(response(text("Bye.")), None)])
    return sid


def oracle(view: Any) -> list[dict[str, Any]]:
    summary, ids = view.session.context_view()
    by_id = {t.id: t for t in view.turns}
    return [m.wire() for m in build_context([by_id[t] for t in ids], summary=summary)]


def printed(messages: list[dict[str, Any]]) -> str:
    """What `history --json` prints for these messages."""
    return "".join(json.dumps(m, ensure_ascii=False) + "\n" for m in messages)


def turn_count(store: ChronicleStore, sid: UUID) -> int:
    session = store.session(sid)
    return len(store.session(sid, version=1).head) + len(session.turns) if session.forked_from else len(session.turns)


def check_session(store: ChronicleStore, sid: UUID) -> int:
    """Every turn and version of the session read every way equals the event rebuild; returns how
    many turns the projection-only path answered."""
    engine = history_engine(store)
    answered = 0
    for n in range(1, turn_count(store, sid) + 1):
        try:
            expected = oracle(as_of_turn(store, sid, n))
        except ValueError:  # a turn that has not ended (awaiting approval)
            continue
        fast = wire_at_turn(store, sid, n, engine)
        if fast is not None:
            answered += 1
            assert printed(fast) == printed(expected), (sid, n)
        assert wire_at(store, cut_at_turn(store, sid, n), engine) == expected, (sid, n)
        assert printed(queries.history(store, sid, at=n)) == printed(expected), (sid, n)
    for v in range(1, store.session(sid).version + 1):
        expected = oracle(as_of_version(store, sid, v))
        assert printed(wire_at(store, cut_at_version(store, sid, v), engine)) == printed(expected), (sid, v)
    return answered


def test_the_wire_rows_show_each_case_as_the_events_do(db_url):
    store = ChronicleStore(db_url)
    b = Builder(store)
    sid = awkward_session(b)
    # One event per batch: a tool result is applied in another transaction than its response, so
    # the projection reads whether that response was sent from its row, not from memory.
    ProjectionEngine(store, [HistoryProjection()], batch_size=1).catch_up()
    shown = queries.history(store, sid, at=9)
    assert shown[0]["content"][0] == IMAGE and "I am A." in printed(shown) and "A.!" in printed(shown)
    assert "I can't" not in printed(shown) and "partial_input_json" not in printed(shown)
    assert check_session(store, sid) == 9  # every turn answered by the projection, none by rebuilding the session
    store.close()


def test_undo_redo_compaction_and_forks_take_the_general_path_and_agree(db_url):
    store = ChronicleStore(db_url)
    b = Builder(store)
    sid = awkward_session(b)
    child = fork(store, sid, 4)
    b.turn(child.id, "on the fork", [(response(text("Forked.")), None)])
    store.update_session(sid, lambda s: s.undo(2, b.now()))
    store.update_session(sid, lambda s: s.redo(b.now()))
    first = store.session(sid).head[0]
    store.update_session(sid, lambda s: s.compact([first], "an image was shown", "summary", b.now()))
    b.turn(sid, "after all that", [(response(text("Still here.")), None)])
    history_engine(store).catch_up()
    assert check_session(store, sid) == 0 and check_session(store, child.id) == 0
    store.close()


def test_a_projection_behind_the_session_is_not_read(db_url):
    store = ChronicleStore(db_url)
    b = Builder(store)
    sid = b.session()
    b.turn(sid, "one", [(response(text("1")), None)])
    engine = history_engine(store)
    engine.catch_up()
    assert wire_at_turn(store, sid, 1, engine) is not None
    b.turn(sid, "two", [(response(text("2")), None)])  # not applied: the session itself lags
    assert not is_current(store, engine, [sid])
    assert wire_at_turn(store, sid, 1, engine) is None
    assert wire_at(store, cut_at_turn(store, sid, 2), engine) == oracle(as_of_turn(store, sid, 2))
    store.close()


def test_another_session_behind_does_not_stop_the_projection_answering(db_url):
    store = ChronicleStore(db_url)
    b = Builder(store)
    sid, other = b.session(), b.session()
    b.turn(sid, "one", [(response(text("1")), None)])
    b.turn(sid, "two", [(response(text("2")), None)])
    b.turn(other, "elsewhere", [(response(text("3")), None)])
    engine = history_engine(store)
    engine.catch_up()
    b.turn(other, "not applied yet", [(response(text("4")), None)])  # another session lags, this one does not
    assert lagging_originators(engine)
    for n in (1, 2):
        fast = wire_at_turn(store, sid, n, engine)
        assert fast is not None and printed(fast) == printed(oracle(as_of_turn(store, sid, n)))
    assert wire_at_turn(store, sid, 3, engine) is None  # no third turn: the general path says so
    store.close()


def test_the_mixed_run_agrees_at_every_turn_and_version(db_url, tmp_path, workspace):
    store = ChronicleStore(db_url)
    run = MixedRun(store, tmp_path, workspace)
    asyncio.run(run.run())
    history_engine(store).catch_up()
    answered = sum(check_session(store, sid) for sid in run.sessions.values())
    assert answered > 5
    store.close()


def test_history_text_renders_the_wire_blocks_as_it_rendered_the_models(db_url):
    """`history` (text) now renders wire dicts: each block must render as its `Message` block did."""
    from types import SimpleNamespace

    from chronicle.runtime.cli.inspect_cmd import render_block

    store = ChronicleStore(db_url)
    sid = awkward_session(Builder(store))
    history_engine(store).catch_up()
    for n in (1, 3, 6, 9):
        typed = queries.history_messages(store, sid, at=n)
        wire = queries.history(store, sid, at=n)
        assert [m["role"] for m in wire] == [m.role for m in typed]
        rendered = [render_block(SimpleNamespace(**b)) for m in wire for b in m["content"]]
        assert rendered == [render_block(b) for m in typed for b in m.content] and len(rendered) > n
    store.close()


def test_a_turn_as_of_each_of_its_versions_from_its_rows_equals_the_turn_replayed(db_url):
    """`turn_wire_at` (a turn's rows up to one of its events' log position) against `store.turn(id,
    version=v)` and `build_context`, for every version of every turn: a long one read across its
    snapshot, and each awkward case (a marked turn is left to the Turn from its mark on)."""
    from chronicle.runtime.past_wire import turn_wire_at

    store = ChronicleStore(db_url)
    b = Builder(store)
    sid = awkward_session(b)
    steps = [(response(text(f"step {i}"), tool_use(f"tu_{i}", "read_file", path=f"{i}.txt")),
              [(f"tu_{i}", f"content {i}", i % 7 == 3)]) for i in range(55)]
    long = b.turn(sid, "a long one", [*steps, (response(text("all read")), None)])
    assert store.turn(long).version > 100  # a snapshot was taken on the way
    engine = history_engine(store)
    engine.catch_up()
    answered = unanswered = 0
    for tid in store.session(sid).turns:
        for v in range(1, store.turn(tid).version + 1):
            expected = [m.wire() for m in build_context([store.turn(tid, version=v)])]
            shown = turn_wire_at(store, tid, v, engine)
            if shown is None:
                unanswered += 1
            else:
                answered += 1
                assert printed(shown) == printed(expected), (tid, v)
    assert answered > 100 and unanswered > 0
    assert turn_wire_at(store, long, store.turn(long).version + 1, engine) is None  # no such version
    b.turn(sid, "not applied yet", [(response(text("later")), None)])
    late = store.session(sid).turns[-1]
    assert turn_wire_at(store, late, 2, engine) is None  # the projection has not seen this turn
    store.close()
