"""The outbox finds the replies due from the reply index, on both backends: a restarted outbox sends a
reply due from before the restart without loading the sessions no channel fed, an input queued
before the index existed is still answered, and concurrent channel inputs each get their entry."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest
from eventsourcing.persistence import OperationalError

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.clock import SYSTEM_CLOCK
from chronicle.runtime.index_checkpoints import Checkpoint
from chronicle.runtime.loop import AgentLoop, LoopOptions
from chronicle.runtime.providers.scripted import ScriptedProvider
from chronicle.runtime.reply_index import REPLY_INDEX_ID, reply_index
from chronicle.runtime.server.channels import ChannelConfig
from chronicle.runtime.server.outbox import Outbox, Outcome
from chronicle.runtime.server.routing import Router, sender_session_id
from chronicle.runtime.sessions import queue_scanned, start_session
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.toolsets import toolbox_for
from tests.closed_at_end import closed_at_end
from tests.counting_store import CountingStore
from tests.helpers import cli, response, text, write_script


def _spec(workspace: Path, script: Path) -> AgentSpec:
    return AgentSpec(name="main", provider=f"scripted:{script}", model="scripted", workspace=str(workspace))


def _run_turn(store: ChronicleStore, workspace: Path, script: Path, sid: Any) -> None:
    loop = AgentLoop(store, ScriptedProvider(script), toolbox_for(()), workspace, options=LoopOptions())
    asyncio.run(loop.run_next(sid))


def _outbox(store: ChronicleStore, channels: dict[str, ChannelConfig], posted: list[dict[str, Any]]) -> Outbox:
    def send(url: str, payload: dict[str, Any]) -> Outcome:
        posted.append(payload)
        return Outcome(True, 1, 200, None)

    return Outbox(store, channels, set(), sender=send)


def test_a_restarted_outbox_sends_a_reply_due_from_before_and_loads_no_session_without_channel_input(
        db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("Hi bob."))])
    store = closed_at_end(ChronicleStore(db_url))
    fed, _ = start_session(store, _spec(workspace, script))
    others = [start_session(store, _spec(workspace, script), "not from a channel")[0].id for _ in range(3)]
    channels = {"alerts": ChannelConfig(session=str(fed.id), coalesce_s=0, reply_url="http://127.0.0.1:9/in")}
    Router(store).record("alerts", channels["alerts"], ["bob"], "hello")
    posted: list[dict[str, Any]] = []
    assert _outbox(store, channels, posted).pass_once() == 0, "its turn has not run"
    _run_turn(store, workspace, script, fed.id)
    restarted = CountingStore(db_url)
    outbox = _outbox(restarted, channels, posted)
    assert outbox.pass_once() == 1
    assert posted[0]["text"] == "Hi bob." and posted[0]["session_id"] == str(fed.id)
    assert restarted.loaded.isdisjoint(others), "the sessions no channel fed are not loaded"
    assert outbox.pass_once() == 0
    again = CountingStore(db_url)
    assert _outbox(again, channels, posted).pass_once() == 0
    assert again.loads["Session"] == 0 and len(posted) == 1, "no reply is due: no session is looked at"


def test_an_input_queued_before_the_index_existed_is_still_answered_after_restarts(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("Hi bob."))])
    store = closed_at_end(ChronicleStore(db_url))
    fed, _ = start_session(store, _spec(workspace, script))
    origin = {"channel": "alerts", "senders": ["bob"], "reply": True}
    store.update_session(fed.id, lambda s: queue_scanned(s, "old-input", "hello", SYSTEM_CLOCK.now(), origin=origin))  # as before
    channels = {"alerts": ChannelConfig(session=str(fed.id), coalesce_s=0, reply_url="http://127.0.0.1:9/in")}
    posted: list[dict[str, Any]] = []
    assert _outbox(store, channels, posted).pass_once() == 0
    assert _outbox(closed_at_end(ChronicleStore(db_url)), channels, posted).pass_once() == 0, "a restart: still not run"
    _run_turn(store, workspace, script, fed.id)
    outbox = _outbox(closed_at_end(ChronicleStore(db_url)), channels, posted)
    assert outbox.pass_once() == 1 and posted[0]["text"] == "Hi bob."
    assert outbox.pass_once() == 0
    assert _outbox(closed_at_end(ChronicleStore(db_url)), channels, posted).pass_once() == 0 and len(posted) == 1


class LosesTheDatabaseOnce(ChronicleStore):
    """A store whose first listing of every session fails as a lost database fails it."""

    name = ChronicleStore.name
    lost = False

    def sessions(self, on_error: Any = None) -> Any:
        if not self.lost:
            self.lost = True
            raise OperationalError("the connection was lost")
        return super().sessions(on_error)


def test_a_look_for_older_inputs_that_failed_writes_no_checkpoint_so_a_restart_looks_again(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("Hi bob."))])
    store = closed_at_end(ChronicleStore(db_url))
    fed, _ = start_session(store, _spec(workspace, script))
    origin = {"channel": "alerts", "senders": ["bob"], "reply": True}
    store.update_session(fed.id, lambda s: queue_scanned(s, "old-input", "hello", SYSTEM_CLOCK.now(), origin=origin))
    channels = {"alerts": ChannelConfig(session=str(fed.id), coalesce_s=0, reply_url="http://127.0.0.1:9/in")}
    posted: list[dict[str, Any]] = []
    flaky = _outbox(closed_at_end(LosesTheDatabaseOnce(db_url)), channels, posted)
    with pytest.raises(OperationalError):
        flaky.pass_once()
    _run_turn(store, workspace, script, fed.id)
    assert flaky.pass_once() == 0, "not a full scan: the session is not watched"
    assert Checkpoint(store, REPLY_INDEX_ID, "outbox", "").read() is None
    assert _outbox(closed_at_end(ChronicleStore(db_url)), channels, posted).pass_once() == 1 and posted[0]["text"] == "Hi bob."


def test_channel_inputs_queued_at_once_are_each_indexed_and_each_answered(db_url, workspace, tmp_path):
    """Inputs on one session and new sessions of senders, from three stores at once: they race for the index's slots."""
    script = write_script(tmp_path / "s.json", [[response(text(f"answer {i}"))] for i in range(6)])
    store = closed_at_end(ChronicleStore(db_url))
    fed, _ = start_session(store, _spec(workspace, script))
    channels = {"alerts": ChannelConfig(session=str(fed.id), coalesce_s=0, reply_url="http://127.0.0.1:9/in"),
                "people": ChannelConfig(route="per_sender", coalesce_s=0, reply_url="http://127.0.0.1:9/in")}

    def write(writer: ChronicleStore, i: int) -> None:
        router = Router(writer, specs={"people": lambda: _spec(workspace, script)})
        for j in range(2):
            router.record("alerts", channels["alerts"], [f"s{i}"], f"m{i}{j}")
        router.record("people", channels["people"], [f"p{i}"], f"hello from p{i}")

    threads = [threading.Thread(target=write, args=(closed_at_end(ChronicleStore(db_url)), i)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(list(reply_index(store).get())) == 9
    for _ in range(6):
        _run_turn(store, workspace, script, fed.id)
    for i in range(3):
        _run_turn(store, workspace, script, sender_session_id("people", f"p{i}"))
    posted: list[dict[str, Any]] = []
    assert _outbox(CountingStore(db_url), channels, posted).pass_once() == 9
    assert sorted(p["text"] for p in posted if p["channel"] == "alerts") == [f"answer {i}" for i in range(6)]
    assert sorted(p["sender"] for p in posted if p["channel"] == "people") == ["p0", "p1", "p2"]


@pytest.mark.parametrize("target_served", [False, True], ids=["fresh-target", "served-target"])
def test_an_imported_channel_turn_whose_reply_the_source_never_recorded_is_not_posted_here(
        db_url, workspace, tmp_path, request, target_served):
    """The turn ran and ended in the source store, whose server owns its reply (and may still post it): a
    server on the store it is imported into does not, whether or not that store has a reply checkpoint yet."""
    from tests.integration.test_bundle import other_store
    from tests.server.test_outbox_lease import _ended_channel_turn

    channels, sid = _ended_channel_turn(db_url, workspace, tmp_path)  # no server ran there: its reply is unsent
    bundle = tmp_path / "bundle.json"
    assert cli("export", str(sid), "--out", str(bundle), db=db_url).returncode == 0
    target = other_store(db_url, tmp_path, request, "target")
    posted: list[dict[str, Any]] = []
    if target_served:
        assert _outbox(closed_at_end(ChronicleStore(target)), channels, posted).pass_once() == 0  # its first checkpoint
    imported = cli("import", str(bundle), db=target)
    assert imported.returncode == 0, imported.stderr
    store = closed_at_end(ChronicleStore(target))
    try:
        assert sid in set(store.session_ids())
        outbox = _outbox(store, channels, posted)
        assert outbox.pass_once() == 0 and posted == []
        assert _outbox(closed_at_end(ChronicleStore(target)), channels, posted).pass_once() == 0 and posted == [], "nor after a restart"
        # A channel here routes a new input to the imported session: its turn is answered, the imported one still not.
        imported_turns = {str(t) for t in store.session(sid).turns}
        Router(store).record("alerts", channels["alerts"], ["monitor"], "and now?")
        ran = cli("worker", "--once", "--workspace", str(workspace), db=target)
        assert ran.returncode == 0, ran.stderr
        outbox.touched.add(sid)
        assert outbox.pass_once() == 1 and len(posted) == 1
        assert posted[0]["turn_id"] not in imported_turns, posted
    finally:
        store.close()



def test_a_channel_message_taken_as_a_credential_leaves_no_reply_waiting(db_url, workspace, tmp_path):
    """In auth mode (seed 001) a channel's message is the credential: no input is queued and no turn will answer it.
    Its reply-index entry (written in the same transaction) waited for a reply forever, so every outbox, restarted
    or not, loaded that session on each pass and its checkpoint never moved past the entry."""
    script = write_script(tmp_path / "s.json", [response(text("unused"))])
    store = closed_at_end(ChronicleStore(db_url))
    fed, _ = start_session(store, _spec(workspace, script))
    store.update_session(fed.id, lambda s: s.await_credential("deploy_token", "the deploy token", "", SYSTEM_CLOCK.now()))
    channels = {"alerts": ChannelConfig(session=str(fed.id), coalesce_s=0, reply_url="http://127.0.0.1:9/in")}
    Router(store).record("alerts", channels["alerts"], ["bob"], "tok-1234567890-SECRET")
    assert store.session(fed.id).pending_auth is None and not store.session(fed.id).queue, "taken as the credential"
    posted: list[dict[str, Any]] = []
    outbox = _outbox(store, channels, posted)
    assert outbox.pass_once() == 0 and outbox.pending.waiting == {}
    again = CountingStore(db_url)
    assert _outbox(again, channels, posted).pass_once() == 0
    assert again.loads["Session"] == 0 and posted == [], "nothing is due: no session is looked at"
