"""On PostgreSQL a running turn asks for steering and cancel with version lookups first and joins the
LISTEN connection only after them: a short turn opens no connection, and no write is missed across
the switch."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.control_probes import WarmingProbe, notify_control
from chronicle.runtime.controls import steer
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
