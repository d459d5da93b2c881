"""A SQLite store's pooled connections keep the statements they compiled (runtime/sqlite_pool.py).

eventsourcing opens them with a statement cache of one: every transaction's BEGIN pushed out the
statement before it, so each read and write was compiled again at every use (three quarters of an
as-of-turn read). SQLite's `sqlite_stmt` table lists the statements a connection holds compiled.
"""

from __future__ import annotations

import sqlite3

import pytest

from chronicle.runtime.past_context import history_engine
from chronicle.runtime.past_wire import text_at_turn
from chronicle.runtime.store import ChronicleStore
from tests.helpers import response, text, tool_use

from .loop_harness import Harness


def _compiled(store: ChronicleStore) -> list[str]:
    with history_engine(store).db.statement() as tx:
        return [sql for (sql,) in tx.rows("SELECT sql FROM sqlite_stmt")]


@pytest.fixture
def url(tmp_path):
    with sqlite3.connect(":memory:") as probe:
        try:
            probe.execute("SELECT sql FROM sqlite_stmt")
        except sqlite3.OperationalError:
            pytest.skip("this SQLite library is built without the sqlite_stmt table (SQLITE_ENABLE_STMTVTAB)")
    return f"sqlite:///{tmp_path / 'chronicle.db'}"


def test_a_read_stays_compiled_across_the_transactions_after_it(url):
    store = ChronicleStore(url)
    marker = "SELECT 'kept across transactions' AS probe"
    with history_engine(store).db.statement() as tx:
        assert tx.rows(marker) == [("kept across transactions",)]
    for _ in range(3):  # other transactions, each with its BEGIN, statement and ROLLBACK
        store.max_position()
    assert marker in _compiled(store)
    store.close()


def test_the_writes_of_a_turn_and_the_as_of_turn_read_are_compiled_once(url, tmp_path, workspace):
    turn = [response(text("reading"), tool_use("tu_1", "read_file", path="hello.txt")), response(text("done"))]
    h = Harness(url, workspace, tmp_path, [turn], auto_approve=True)
    assert h.run("one").status == "completed"
    store = h.store
    engine = history_engine(store)
    engine.catch_up()
    assert text_at_turn(store, h.session_id, 1, engine) is not None
    store.max_position()
    compiled = _compiled(store)
    assert any(sql.startswith("INSERT INTO stored_events") for sql in compiled)
    assert any("proj_history_turn_ends" in sql and "UNION ALL" in sql for sql in compiled)
    store.close()
