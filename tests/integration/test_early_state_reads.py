"""A state read of a version earlier than any snapshot can be is one query, not two.

Snapshots are taken from an interval's worth of events on (runtime/snapshot_schedule.py), so the repository's
look for one before reading a version below that found nothing: on PostgreSQL a statement a fork's cut, an
inherited turn and `history --version` paid each time, on a backend just started the dearest part of a cold read.
Past the interval the snapshot is still used, and either way the state is the events' state."""

from __future__ import annotations

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
from tests.conftest import fresh_pg_url
from tests.helpers import pg_statements


class EveryThird(ChronicleStore):
    name = ChronicleStore.name
    snapshotting_intervals = {cls: 3 for cls in ChronicleStore.snapshotting_intervals}


def test_an_early_version_is_read_from_its_events_and_a_later_one_from_its_snapshot(pg_database, tmp_path):
    url = fresh_pg_url(pg_database)
    spec = AgentSpec(name="main", provider="scripted", model="m", workspace=str(tmp_path))
    with EveryThird(url) as store:
        session, _ = start_session(store, spec, "one")
        for text in ("two", "three", "four", "five"):
            submit_input(store, session.id, text)
        latest = store.session(session.id)
        assert latest.version >= 5
        with EveryThird(url) as cold:
            early = []
            statements = pg_statements(lambda: early.append(cold.session(session.id, version=2)))
            assert not [s for s in statements if "snapshots" in s], statements
            later = []
            statements = pg_statements(lambda: later.append(cold.session(session.id, version=4)))
            assert [s for s in statements if "snapshots" in s], statements  # version 3 has one: it is read first
        assert [q["text"] for q in early[0].queue] == ["one"] and [q["text"] for q in later[0].queue] == ["one", "two", "three"]
        assert early[0].version == 2 and later[0].version == 4
        assert later[0].queue == store.session(session.id, version=4).queue
