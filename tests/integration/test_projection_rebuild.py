"""A rebuild from zero gives exactly the rows that incremental updates gave, on both backends."""

from __future__ import annotations

import asyncio
import json

import pytest

from chronicle.projections import ProjectionEngine, all_projections
from chronicle.projections.cost import CostReport
from chronicle.projections.history import HistoryProjection
from chronicle.runtime.pricing import price
from chronicle.runtime.store import ChronicleStore

from .projection_run import MixedRun


def mixed_run(url, tmp_path, workspace):  # type: ignore[no-untyped-def]
    store = ChronicleStore(url)
    # A small batch size makes batch boundaries fall inside turns and saves.
    engine = ProjectionEngine(store, all_projections(pricer=price), batch_size=7)
    run = MixedRun(store, tmp_path, workspace, after_each=engine.catch_up)
    asyncio.run(run.run())
    return store, engine, run


@pytest.fixture
def mixed(db_url, tmp_path, workspace, monkeypatch):
    # Spans of two turns, so that the run's sessions have some (a span is 32 turns otherwise).
    monkeypatch.setattr(HistoryProjection, "span_turns", 2)
    store, engine, run = mixed_run(db_url, tmp_path, workspace)
    yield store, engine, run
    store.close()


def test_rebuilding_every_projection_from_zero_gives_the_incremental_rows(mixed):
    store, engine, run = mixed
    engine.catch_up()
    incremental = {name: engine.dump(name) for name in engine.projections}
    # every table has rows, but the list of undecodable events: every event of this run decodes
    # (test_session_listing.py damages one); and results kept only while their step is open
    empty_at_rest = {"proj_summaries_unreadable", "proj_history_kept", "proj_audit_waiting"}
    assert all(rows for tables in incremental.values() for table, rows in tables.items() if table not in empty_at_rest)
    # a completed call's row has its output, which its turn stores, read in the same batch or a later one
    completed = [json.loads(row[10]) for row in incremental["audit"]["proj_audit"] if row[6:9:2] == ("tool_call", "completed")]
    assert completed and all(isinstance(detail.get("output"), str) for detail in completed)

    engine.rebuild()
    rebuilt = {name: engine.dump(name) for name in engine.projections}
    assert rebuilt == incremental
    assert [(s.name, s.lag) for s in engine.status()] == [(n, 0) for n in engine.projections]
    assert {s.position for s in engine.status()} == {store.max_position()}

    # a second engine (another process, say) over the same store never applies an event twice
    other = ProjectionEngine(ChronicleStore(store.url), all_projections(pricer=price), batch_size=5)
    engine.rebuild(["audit"])
    before = engine.dump("audit")
    assert other.catch_up() == 0
    assert other.dump("audit") == before


def test_sub_agent_cost_rolls_up_into_every_ancestor(sqlite_url, tmp_path, workspace):
    store, engine, run = mixed_run(sqlite_url, tmp_path, workspace)
    with engine.read() as tx:
        report = CostReport(tx)
    s = {k: str(v) for k, v in run.sessions.items()}
    a = {o["scope"] + ":" + o["session_id"]: o for o in report.for_session(s["a"])}
    own = {k: report.for_session(s[k])[0] for k in ("a", "a1", "a2", "a2x")}
    total_a = a["total:" + s["a"]]
    for kind in ("input_tokens", "output_tokens", "cache_creation_input_tokens", "cache_read_input_tokens"):
        assert total_a[kind] == sum(own[k][kind] for k in own)
    assert total_a["usd"] == pytest.approx(sum(own[k]["usd"] for k in own))
    # one object per direct child, each with its own sub-agents rolled in
    assert sorted(k for k in a if k.startswith("child:")) == sorted(["child:" + s["a1"], "child:" + s["a2"]])
    assert a["child:" + s["a2"]]["input_tokens"] == own["a2"]["input_tokens"] + own["a2x"]["input_tokens"]
    # an unknown model has no price rather than a guessed one
    unpriced = report.for_session(s["f"])[0]
    assert unpriced["usd"] is None and unpriced["unpriced_calls"] == 1


def test_projections_at_different_positions_catch_up_together_to_the_rows_a_rebuild_gives(db_url, tmp_path, workspace):
    # Only the cost projection is kept current during the run (as the cost guard does); the
    # others then start far behind it and share batches with it once they reach its position.
    store = ChronicleStore(db_url)
    engine = ProjectionEngine(store, all_projections(pricer=price), batch_size=6)
    run = MixedRun(store, tmp_path, workspace, after_each=lambda: engine.catch_up(["cost"]))
    asyncio.run(run.run())
    head = store.max_position()
    assert engine.position("cost") == head
    assert engine.position("history") == 0 and engine.position("audit") == 0
    applied = engine.catch_up()
    assert applied == 3 * engine.db.count_after(0)  # every event once into each projection that was behind, none twice
    caught_up = {name: engine.dump(name) for name in engine.projections}
    engine.rebuild()
    assert {name: engine.dump(name) for name in engine.projections} == caught_up
    assert {s.position for s in engine.status()} == {head}
    store.close()


def test_a_read_model_built_from_a_long_log_is_announced_once(db_url, tmp_path, workspace, monkeypatch, caplog):
    """The first command to read a new or upgraded read model builds it from the whole log: seconds
    of silence on a large store, unless it says so (here "large" is lowered to this log's size)."""
    from chronicle.projections import engine as engine_module
    from chronicle.projections.history import HistoryProjection

    store, _, _ = mixed_run(db_url, tmp_path, workspace)
    monkeypatch.setattr(engine_module, "ANNOUNCE_FROM", store.max_position())

    class Upgraded(HistoryProjection):
        version = HistoryProjection.version + 1

    with caplog.at_level("WARNING", logger="chronicle.projections.engine"):
        ProjectionEngine(store, [Upgraded()])
        ProjectionEngine(store, [Upgraded()])  # already set up: nothing to say
    said = [r.getMessage() for r in caplog.records]
    assert said == [f"building the history read model (v{Upgraded.version}) from the log's {store.max_position():,} events; "
                    "this happens once (`chronicle projections rebuild history` shows progress)"]
    monkeypatch.setattr(engine_module, "ANNOUNCE_FROM", store.max_position() + 1)
    caplog.clear()

    class Again(HistoryProjection):
        version = HistoryProjection.version + 2

    with caplog.at_level("WARNING", logger="chronicle.projections.engine"):
        ProjectionEngine(store, [Again()])
    assert caplog.records == []  # a shorter log is built without a word
    store.close()


def test_a_batch_that_fails_part_way_leaves_nothing_and_is_applied_once_after(db_url, tmp_path, workspace):
    """A batch is one transaction, and on PostgreSQL its writes are pipelined (sent without waiting
    for each answer): an error in the middle surfaces only later, and must still undo every row the
    batch wrote before it and leave the position where it was."""
    from chronicle.domain.session import Session
    from chronicle.domain.turn import Turn
    from chronicle.projections.base import Projection, on

    class Fragile(Projection):
        name, version = "fragile", 1
        tables = {"proj_fragile": "position INTEGER PRIMARY KEY, kind TEXT NOT NULL"}
        broken = True

        @on(Turn.Created, Turn.Completed, Session.TurnEnded)
        def _seen(self, tx, e, position):  # type: ignore[no-untyped-def]
            tx.execute("INSERT INTO proj_fragile VALUES (%s, %s)", (position, type(e).__qualname__))
            if self.broken and type(e).__qualname__ == "Turn.Completed":
                tx.execute("UPDATE proj_no_such_table SET x = 1")  # fails on the server, answered later

    store = ChronicleStore(db_url)
    asyncio.run(MixedRun(store, tmp_path, workspace).run())
    fragile = Fragile()
    engine = ProjectionEngine(store, [fragile], batch_size=10_000)
    with pytest.raises(Exception, match="proj_no_such_table"):
        engine.catch_up()
    assert engine.position("fragile") == 0
    assert engine.dump("fragile") == {"proj_fragile": []}  # the rows before the error went with it
    fragile.broken = False
    assert engine.catch_up() == engine.db.count_after(0)
    rows = engine.dump("fragile")["proj_fragile"]
    assert [kind for _, kind in rows].count("Turn.Completed") >= 1
    assert len({position for position, _ in rows}) == len(rows)  # each event once
    assert engine.position("fragile") == store.max_position()
    store.close()


def test_a_rebuild_in_two_processes_gives_the_incremental_rows(mixed):
    """On PostgreSQL a long log is rebuilt by this process and a helper, each applying the log to
    half of the read models (runtime/parallel_rebuild.py); the rows are the incremental ones, every
    projection reports its progress to the end, and on SQLite the rebuild stays in one process."""
    from chronicle.runtime import parallel_rebuild
    from chronicle.runtime.read_models import projection_engine

    store, engine, run = mixed
    engine.catch_up()
    incremental = {name: engine.dump(name) for name in engine.projections}
    seen: dict[str, int] = {}
    helpers: list[int] = []
    real_start = parallel_rebuild.multiprocessing.get_context("spawn").Process.start

    def start(process):  # type: ignore[no-untyped-def]
        helpers.append(1)
        return real_start(process)

    parallel_rebuild.multiprocessing.get_context("spawn").Process.start = start  # type: ignore[method-assign]
    try:
        applied = parallel_rebuild.rebuild(store, progress=lambda name, position, head: seen.__setitem__(name, position),
                                           parallel_from=0)
    finally:
        parallel_rebuild.multiprocessing.get_context("spawn").Process.start = real_start  # type: ignore[method-assign]
    head = store.max_position()
    assert helpers == ([] if store.backend == "sqlite" else [1])
    assert applied == head * len(engine.projections)
    assert seen == {name: head for name in engine.projections}
    shared = projection_engine(store)
    assert {name: shared.dump(name) for name in shared.projections} == incremental
    assert [(s.name, s.lag) for s in shared.status()] == [(n, 0) for n in shared.projections]


def test_a_helper_that_fails_fails_the_rebuild_with_its_reason(pg_database, monkeypatch):
    """The helper cannot open the store (here: its database is gone): the rebuild says so, naming
    the read models it was rebuilding, rather than reporting them rebuilt."""
    from urllib.parse import urlparse

    from chronicle.runtime import parallel_rebuild
    from tests.conftest import fresh_pg_url

    monkeypatch.setenv("CHRONICLE_PG_CONNECT_TIMEOUT", "1")
    url = fresh_pg_url(pg_database)
    store = ChronicleStore(url)
    database = urlparse(url).path
    monkeypatch.setattr(store, "url", url.replace(database, database + "_gone", 1))
    with pytest.raises(parallel_rebuild.RebuildFailed, match=r"rebuilding .* in a helper process failed: \w+"):
        parallel_rebuild.rebuild(store, parallel_from=0)
    store.close()
