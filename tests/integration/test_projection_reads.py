"""A rebuild reads the projection tables a bounded number of times per batch, not once per step.

On PostgreSQL a batch's writes are pipelined: every read waits for the server, so a handler that
reads per step turns a rebuild into one round trip per step. Audit v6 read once per tool result
whose call had not ended in the same transaction: a turn written without ToolCall aggregates (as
the bench's 100k-event store is) did that at every step, and its rebuild fell from 24.7k to 8.3k
events/s without any test noticing. Counting reads is what a test can do about it; times belong
to ops/bench."""

from __future__ import annotations

from datetime import datetime, timezone

from chronicle.projections import sql
from chronicle.runtime.read_models import projection_engine
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, response, text, tool_use, write_script
from tests.written_sessions import lookup_session, tool_turn


def _run(db_url, workspace, tmp_path, name: str, steps: int) -> None:  # noqa: ANN001
    """A session run by the loop: each step a read and a call of an unknown tool (which fails)."""
    (workspace / "a.txt").write_text("alpha\n", encoding="utf-8")
    script = [response(tool_use(f"r{i}", "read_file", path="a.txt"), tool_use(f"x{i}", "no_such_tool")) for i in range(steps)]
    path = write_script(tmp_path / f"{name}.json", [*script, response(text("Done."))])
    ran = cli("run", f"read {steps} times", "--provider", f"scripted:{path}", "--workspace", str(workspace), "--yes", db=db_url)
    assert ran.returncode == 0, ran.stderr


def _written(db_url, workspace, steps: int) -> None:  # noqa: ANN001
    """A session whose turn has tool results and no ToolCall aggregates, saved in one commit."""
    store = ChronicleStore(db_url)
    now = datetime(2026, 1, 1, tzinfo=timezone.utc)
    session = lookup_session(workspace, now)
    store.create_session(session)
    store.save(session, tool_turn(session, 1, steps, now, step_s=1))
    store.close()


def _reads_in_rebuild(db_url, monkeypatch) -> tuple[int, int]:  # noqa: ANN001
    """(reads of the read models' tables, events) in one rebuild of all four, in one batch."""
    reads = [0]
    real = sql.Tx._read

    def counted(self, statement, params):  # noqa: ANN001
        reads[0] += 1
        return real(self, statement, params)

    store = ChronicleStore(db_url)
    engine = projection_engine(store)
    monkeypatch.setattr(sql.Tx, "_read", counted)
    try:
        events = engine.rebuild()
    finally:
        monkeypatch.setattr(sql.Tx, "_read", real)
    store.close()
    return reads[0], events


def test_a_rebuild_reads_no_more_for_more_steps(db_url, workspace, tmp_path, monkeypatch):
    _run(db_url, workspace, tmp_path, "short", 2)
    _written(db_url, workspace, 2)
    reads_short, events_short = _reads_in_rebuild(db_url, monkeypatch)
    _run(db_url, workspace, tmp_path, "long", 12)  # six times the steps, each with a failed call
    _written(db_url, workspace, 40)
    reads_long, events_long = _reads_in_rebuild(db_url, monkeypatch)
    assert events_long > 3 * events_short
    # A new session and its turn may cost a read or two (its parents, the turn's number); its steps, none.
    assert reads_long - reads_short <= 6, (reads_short, reads_long)
