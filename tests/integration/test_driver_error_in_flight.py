"""psycopg's own connection error reaching a turn's crash handling (a connection eventsourcing does not wrap: the
control listener's) leaves the turn in flight for `resume`, as eventsourcing's errors do; it was taken for a bug and
the turn recorded as failed, for good. The error is a real one, from a connection the server ended."""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.loop import AgentLoop, LoopOptions
from chronicle.runtime.providers import ScriptedProvider
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.toolsets import toolbox_for
from chronicle.runtime.turn_outcome import crashed
from tests.helpers import response, text, write_script


def _terminated_connection_error(url: str) -> psycopg.OperationalError:
    with psycopg.connect(url.split("?")[0], autocommit=True) as victim, psycopg.connect(url.split("?")[0], autocommit=True) as admin:
        pid = victim.info.backend_pid
        admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
        with pytest.raises(psycopg.OperationalError) as lost:
            victim.execute("SELECT 1")
    return lost.value


def test_a_raw_driver_connection_error_leaves_the_turn_in_flight(db_url, pg_database, workspace, tmp_path):
    store = ChronicleStore(db_url)
    loop = AgentLoop(store, ScriptedProvider(write_script(tmp_path / "s.json", [response(text("done"))])), toolbox_for(()),
                     workspace, options=LoopOptions())
    session, _ = start_session(store, AgentSpec(workspace=str(workspace)), "go")
    turn, session = loop._begin_turn(session)
    error = _terminated_connection_error(pg_database)

    outcome = asyncio.run(crashed(loop.io, session, turn, error))

    assert outcome.status == "interrupted", outcome.reason
    assert outcome.reason is not None and "lost the event store" in outcome.reason and f"resume {session.id}" in outcome.reason
    assert store.turn(turn.id).status == "running", "the turn was ended: no resume can continue it"
    assert store.session(session.id).active_turn_id == turn.id
    assert asyncio.run(loop.run_next(session.id)).status == "completed"  # what `resume` does
    store.close()
