"""A turn's final response is stored with the turn's end, in one transaction, and is never lost on the
way there: a cancel or a crash during the final checks stores it before the turn is ended. Both
backends; on PostgreSQL, a short turn opens no LISTEN connection for its controls."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.controls import WarmingProbe, notify_control, steer
from chronicle.runtime.hooks import Hook, Hooks
from chronicle.runtime.live import Broker
from chronicle.runtime.loop import AgentLoop, LoopOptions
from chronicle.runtime.providers.scripted import ScriptedProvider
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.toolsets import toolbox_for
from tests.helpers import response, text, tool_use, write_script

TOOLS = ("read_file",)


def make_loop(store: ChronicleStore, workspace: Any, tmp_path: Any, main: list[Any], hooks: Hooks | None = None,
              broker: Broker | None = None) -> AgentLoop:
    script = write_script(tmp_path / "script.json", main)
    return AgentLoop(store, ScriptedProvider(script), toolbox_for(TOOLS), workspace, broker=broker, hooks=hooks,
                     options=LoopOptions())


def start(store: ChronicleStore, workspace: Any) -> Any:
    session, _ = start_session(store, AgentSpec(name="main", model="scripted", tools=TOOLS, workspace=str(workspace)), "read it")
    return session.id


def log_of(store: ChronicleStore, session_id: Any) -> list[tuple[int, str]]:
    session = store.session(session_id)
    return [(position, type(event).__name__) for position, event in store.events_with_positions([session_id, *session.turns])]


def test_the_final_response_is_stored_with_the_turns_end(db_url, workspace, tmp_path):
    store = ChronicleStore(db_url)
    sid = start(store, workspace)
    loop = make_loop(store, workspace, tmp_path, [response(tool_use("t1", "read_file", path="hello.txt")), response(text("done"))])
    outcome = asyncio.run(loop.run_next(sid))
    assert outcome is not None and (outcome.status, outcome.text) == ("completed", "done")
    turn = store.turn(store.session(sid).turns[-1])
    assert [s["response"]["stop_reason"] for s in turn.steps] == ["tool_use", "end_turn"]
    log = log_of(store, sid)
    names = [name for _, name in log]
    # The first response is saved on its own (its tool runs next); the last one in the save that ends
    # the turn (the session's TurnEnded first, then the turn's events).
    assert names[-3:] == ["TurnEnded", "ModelResponded", "Completed"]
    assert names[-4] != "ModelResponded" and names.count("ModelResponded") == 2
    store.close()


class CancelledWhileChecking(Hook):
    """Ctrl-C while a final guardrail runs: the turn's task is cancelled at the check's first wait."""

    async def check_final(self, session: Any, turn: Any, checked: Any) -> Any:
        task = asyncio.current_task()
        assert task is not None
        task.cancel()
        await asyncio.sleep(1)
        return checked


def test_a_cancel_during_the_final_checks_keeps_the_final_response(db_url, workspace, tmp_path):
    store = ChronicleStore(db_url)
    sid = start(store, workspace)
    loop = make_loop(store, workspace, tmp_path, [response(text("the answer"))], hooks=Hooks([CancelledWhileChecking()]))
    outcome = asyncio.run(loop.run_next(sid))
    assert outcome is not None and outcome.status == "cancelled"
    session = store.session(sid)
    turn = store.turn(session.turns[-1])
    assert turn.status == "cancelled" and session.active_turn_id is None
    assert [s["response"]["content"] for s in turn.steps] == [[{"type": "text", "text": "the answer"}]]
    store.close()


class FailingFinish(Hook):
    async def before_finish(self, session: Any, turn: Any, response: Any) -> Any:
        raise RuntimeError("the finish check broke")


def test_a_crash_in_the_final_checks_keeps_the_final_response(db_url, workspace, tmp_path):
    store = ChronicleStore(db_url)
    sid = start(store, workspace)
    loop = make_loop(store, workspace, tmp_path, [response(text("the answer"))], hooks=Hooks([FailingFinish()]))
    outcome = asyncio.run(loop.run_next(sid))
    assert outcome is not None and outcome.status == "failed" and "the finish check broke" in (outcome.reason or "")
    session = store.session(sid)
    turn = store.turn(session.turns[-1])
    assert turn.status == "failed" and session.active_turn_id is None
    assert [s["response"]["stop_reason"] for s in turn.steps] == ["end_turn"]
    store.close()


class ListenerSeen(Hook):
    def __init__(self, store: ChronicleStore) -> None:
        self.store = store
        self.seen: list[bool] = []

    async def after_model_call(self, session: Any, turn: Any, response: Any) -> None:
        self.seen.append("_control_listener" in self.store.__dict__)


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_on_postgresql_a_short_turn_opens_no_listener(db_url, workspace, tmp_path):
    store = ChronicleStore(db_url)
    sid = start(store, workspace)
    seen = ListenerSeen(store)
    loop = make_loop(store, workspace, tmp_path, [response(tool_use("t1", "read_file", path="hello.txt")), response(text("done"))],
                     hooks=Hooks([seen]))
    outcome = asyncio.run(loop.run_next(sid))
    assert outcome is not None and outcome.status == "completed"
    assert seen.seen == [False, False]
    store.close()


@pytest.mark.parametrize("db_url", ["postgres"], indirect=True)
def test_on_postgresql_the_warming_probe_sees_every_write_before_and_after_it_joins_the_listener(db_url, workspace):
    import time

    store, other = ChronicleStore(db_url), ChronicleStore(db_url)
    sid = start(store, workspace)
    probe = WarmingProbe(store, sid, lookups=2)
    probe.mark()
    assert not probe.changed()  # a lookup: nothing written
    steer(other, sid, "left")
    assert probe.changed()  # a lookup sees another process's write
    probe.mark()
    assert "_control_listener" not in store.__dict__
    assert probe.changed()  # lookups used up: joins the listener and says so once, for the read that follows
    assert "_control_listener" in store.__dict__
    probe.mark()
    assert not probe.changed()
    notify_control(other, sid)
    deadline = time.monotonic() + 5
    while not probe.changed() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert probe.changed()
    probe.close()
    assert "_control_listener" not in store.__dict__
    other.close()
    store.close()
