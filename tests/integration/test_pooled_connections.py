"""The store's pooled PostgreSQL connections stay as eventsourcing made them: autocommit.

The read models read through the same pool as the recorders (one datastore). A read model's
single-statement read once handed its connection back out of autocommit mode, and the next
snapshot taken on that connection failed eventsourcing's own check (`assert conn.autocommit`):
in a process that both reads the read models and runs turns (the server, chat, a worker), a
turn could fail at its 100th event.
"""

from __future__ import annotations

from datetime import datetime, timezone
from uuid import uuid4

from chronicle.domain.lease import SessionLease
from chronicle.runtime.read_models import projection_engine
from chronicle.runtime.store import ChronicleStore
from tests.conftest import fresh_pg_url


def test_a_read_model_read_leaves_the_pool_able_to_take_a_snapshot(pg_database):
    store = ChronicleStore(fresh_pg_url(pg_database))
    lease = SessionLease(id=uuid4(), session_id=uuid4(), timestamp=datetime.now(timezone.utc))
    store.save(lease)
    engine = projection_engine(store)
    for _ in range(3):
        engine.status()  # position reads: single statements on the pool's connections
        with engine.db.statement() as tx:
            assert tx.value("SELECT 1") == 1
    with store.recorder.datastore.get_connection() as conn:
        assert conn.autocommit
    store.take_snapshot(lease.id)  # eventsourcing's snapshot insert asserts autocommit
    assert store.snapshots is not None and list(store.snapshots.get(lease.id))
    store.close()
