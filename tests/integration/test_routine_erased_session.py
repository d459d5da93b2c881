"""A lightweight routine's kept session erased by `chronicle forget` in another process, on both backends: this
process still holds the session's key (a worker that has run it), so its next firing is refused by the store, not
by anything it knows; it fires again into a new session for the routine, and another process's engine finds that
same session, not a third one."""

from __future__ import annotations

import base64
import os

import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.app.forget import forget
from chronicle.runtime.routine_engine import RoutineEngine, routine_session_id
from chronicle.runtime.store import ChronicleStore

TOML = '[routines.look]\ntrigger = "manual"\nprompt = "Look."\n'


@pytest.fixture
def cipher(monkeypatch):
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", base64.b64encode(os.urandom(32)).decode())


def _engine(store: ChronicleStore, workspace, holder: str) -> RoutineEngine:
    spec = AgentSpec(name="main", provider="scripted:/dev/null", model="scripted", workspace=str(workspace))
    return RoutineEngine.for_workspace(store, workspace, spec, holder)


def test_a_firing_refused_on_an_erased_session_fires_into_a_new_one(db_url, workspace, cipher):
    (workspace / "chronicle.toml").write_text(TOML, encoding="utf-8")
    store = ChronicleStore(db_url)
    worker = _engine(store, workspace, "w")
    [look] = worker.routines
    first = worker.fire(look, "manual/1")
    assert first is not None and first.session_id == routine_session_id(worker.scope, "look")
    assert store.session(first.session_id).queue, "read here: its key is in this process's memory"
    forget(ChronicleStore(db_url), first.session_id)  # elsewhere: `chronicle forget`

    second = worker.fire(look, "manual/2")  # within TreeKeys.fresh_for: only the store's refusal says it was erased
    assert second is not None and second.session_id not in (None, first.session_id)
    assert second.replaces_session_id == first.session_id
    assert [i["input_id"] for i in store.session(second.session_id).queue] == [second.input_id]

    elsewhere = _engine(ChronicleStore(db_url), workspace, "other")
    third = elsewhere.fire(look, "manual/3")
    assert third is not None and (third.session_id, third.replaces_session_id) == (second.session_id, None)
    assert worker.fire(look, "manual/2") is None, "a due time fired already is not fired again"
