"""A read in a pipelined projection transaction gets its own answer, however many writes went before.

A catch-up sends its writes without waiting for their answers (psycopg's pipeline mode). The server
flushes its output buffer on its own when it fills (a few hundred writes' answers), and such an
answer can then reach psycopg while a later read waits. On the cursor that sent the write it stood
as the read's result, and the viewer's catch-up of a 1,000-turn session failed with "the last
operation didn't produce records (command status: UPDATE 1)"."""

from __future__ import annotations

import time

from chronicle.projections.engine import ProjectionEngine
from chronicle.runtime.store import ChronicleStore
from tests.conftest import fresh_pg_url


def test_a_read_after_hundreds_of_pipelined_writes_returns_its_own_rows(pg_database):
    store = ChronicleStore(fresh_pg_url(pg_database))
    db = ProjectionEngine(store, []).db
    with db.transaction() as tx:
        tx.execute("CREATE TABLE probe (k BIGINT PRIMARY KEY, v TEXT)")
        tx.execute("INSERT INTO probe VALUES (1, '')")
    read: list[tuple[int, str | None]] = []
    # Enough writes to fill the server's output buffer at some point before the read, at varied
    # counts so that the flush lands on different statements.
    for writes in range(250, 650, 20):
        with db.transaction(pipelined=True) as tx:
            for n in range(writes):
                tx.execute("UPDATE probe SET v = %s WHERE k = 1", (f"write {n}",))
            time.sleep(0.01)  # the flushed answers arrive before the read is sent, as after a slow handler
            read.append((writes, tx.value("SELECT v FROM probe WHERE k = 1")))
            assert tx.dicts("SELECT k, v FROM probe") == [{"k": 1, "v": f"write {writes - 1}"}]
    assert read == [(writes, f"write {writes - 1}") for writes in range(250, 650, 20)]
    store.close()
