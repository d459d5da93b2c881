"""Who finishes the files an interrupted undo/redo --files owes: the worker before the session's next turn, and
only one finisher at a time, under the session's lease (resume, doctor --repair and workers may all try at once).

The interrupted undo is made as test_undo_files_crash makes it (killed at the test-only gate between its record
and its writes); a finisher is held at the same gate, before its writes, while another one tries.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import warnings
from contextlib import closing
from uuid import UUID

from chronicle import Agent, Chronicle
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.undo_redo import TEST_HALT_ENV
from tests import processes
from tests.helpers import _base_env, cli, response, text
from tests.integration.test_undo_files_crash import interrupted_undo, owed, session_events
from tests.recovery import wait_for


def positions(db_url: str, sid: str, *names: str) -> dict[str, list[int]]:
    with closing(ChronicleStore(db_url)) as store:
        found: dict[str, list[int]] = {name: [] for name in names}
        for position, event in store.events_with_positions([UUID(sid)]):
            if type(event).__name__ in found:
                found[type(event).__name__].append(position)
        return found


def test_the_worker_finishes_the_owed_files_before_the_sessions_next_turn_and_says_so(db_url, tmp_path):
    workspace, sid = interrupted_undo(db_url, tmp_path)
    (tmp_path / "script.json").write_text(json.dumps({"agents": {"main": [response(text("next answer"))]}}), encoding="utf-8")
    submitted = cli("submit", "--session", sid, "what now?", db=db_url)
    assert submitted.returncode == 0, submitted.stderr
    said: list[str] = []
    with Chronicle(db_url) as app:
        done = app.work(once=True, log=said.append)
    assert [r.status for r in done] == ["completed"]
    assert (workspace / "win.txt").read_bytes() == b"one\ntwo\n" and not (workspace / "new.txt").exists()
    assert owed(db_url, sid) is None
    found = positions(db_url, sid, "FilesRestored", "TurnStarted")
    assert len(found["FilesRestored"]) == 1 and found["FilesRestored"][0] < found["TurnStarted"][-1]
    assert any("finished the files of an interrupted undo --files" in line and sid in line for line in said), said


def test_a_second_finisher_leaves_the_owed_files_to_the_one_holding_the_session(db_url, tmp_path):
    """resume holds the session's lease while it finishes (held here before its writes); doctor --repair, trying
    meanwhile, writes nothing and records nothing, and says who has it. Without the lease both wrote the files, and
    the one that recorded could record as refused a file the other had just put back."""
    workspace, sid = interrupted_undo(db_url, tmp_path)
    gate = tmp_path / "finisher-gate"
    env = {**_base_env(), "CHRONICLE_DB": db_url, TEST_HALT_ENV: str(gate)}
    first = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "resume", sid], env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: gate.exists() or first.poll() is not None, timeout=60)
        assert first.poll() is None, first.communicate()

        second = cli("doctor", "--repair", "--json", db=db_url)
        [finding] = [json.loads(line) for line in second.stdout.splitlines() if '"files_owed"' in line]
        assert not finding["repaired"] and "holds the session" in finding["detail"], finding
        assert second.returncode == 1, second.stdout + second.stderr  # found and not repaired
        assert (workspace / "win.txt").read_bytes() == b"uno\ndos\n" and (workspace / "new.txt").exists()  # untouched
        assert session_events(db_url, sid, "FilesRestored") == []

        os.unlink(gate)
        out, err = first.communicate(timeout=60)
    finally:
        processes.stop(first)
    assert first.returncode == 0, out + err
    assert "finished the files of an interrupted undo --files" in err
    [restored] = session_events(db_url, sid, "FilesRestored")
    assert {f["path"]: f["action"] for f in restored.files} == {"win.txt": "restored", "new.txt": "deleted"}  # type: ignore[attr-defined]
    assert (workspace / "win.txt").read_bytes() == b"one\ntwo\n" and not (workspace / "new.txt").exists()
    assert owed(db_url, sid) is None


def test_run_on_the_session_finishes_the_owed_files_before_its_turn_from_the_cli_and_the_library(db_url, tmp_path):
    """`run --session` (and chat, and the library's run, which open a session the same way) went on with new turns
    on a workspace the log said had been put back; the files are written first, and said."""
    workspace, sid = interrupted_undo(db_url, tmp_path)
    (tmp_path / "script.json").write_text(json.dumps({"agents": {"main": [[response(text("a"))], [response(text("b"))],
                                                                          [response(text("c"))]]}}), encoding="utf-8")
    ran = cli("run", "what now?", "--session", sid, db=db_url)
    assert ran.returncode == 0, ran.stderr
    assert "finished the files of an interrupted undo --files" in ran.stderr
    assert (workspace / "win.txt").read_bytes() == b"one\ntwo\n" and not (workspace / "new.txt").exists()
    found = positions(db_url, sid, "FilesRestored", "TurnStarted")
    assert len(found["FilesRestored"]) == 1 and found["FilesRestored"][0] < found["TurnStarted"][-1]

    (tmp_path / "other").mkdir()
    other_workspace, other = interrupted_undo(db_url, tmp_path / "other")
    (tmp_path / "other" / "script.json").write_text((tmp_path / "script.json").read_text(encoding="utf-8"), encoding="utf-8")
    with Chronicle(db_url) as app, warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        result = app.run_sync(Agent(name="main"), "and now?", session=other)
    assert any("finished the files" in note for note in result.notes), result.notes
    assert any("finished the files" in str(w.message) for w in warned)
    assert (other_workspace / "win.txt").read_bytes() == b"one\ntwo\n" and owed(db_url, other) is None


def test_the_worker_finishes_the_owed_files_of_a_session_with_nothing_else_to_do(db_url, tmp_path):
    """An idle session that owes only the writes of an interrupted undo --files is work for a worker: the files are
    put back and recorded, no turn runs. (It was left for `resume` or `doctor --repair` to notice.)"""
    workspace, sid = interrupted_undo(db_url, tmp_path)
    said: list[str] = []
    with Chronicle(db_url) as app:
        done = app.work(once=True, log=said.append)
    assert done == []  # no turn ran
    assert (workspace / "win.txt").read_bytes() == b"one\ntwo\n" and not (workspace / "new.txt").exists()
    assert owed(db_url, sid) is None and len(session_events(db_url, sid, "FilesRestored")) == 1
    assert any("finished the files of an interrupted undo --files" in line for line in said), said
    again = cli("resume", "--all", db=db_url)  # nothing left: resume --all says so, not a line per finished session
    assert again.returncode == 0 and "no session has a turn in flight or a queued input" in again.stdout + again.stderr


def finishing_in_a_thread(db_url: str, sid: str, holder: str, lease_s: float):
    """finish_owed on a thread of this process, as resume runs it, stopped at the gate before its writes."""
    from chronicle.runtime.files_owed import finish_owed

    outcome: dict[str, object] = {}

    def finish() -> None:
        with closing(ChronicleStore(db_url)) as store:
            try:
                outcome["done"] = finish_owed(store, UUID(sid), holder=holder, lease_s=lease_s)
            except BaseException as exc:  # said by the test, not lost on the thread
                outcome["error"] = exc

    thread = threading.Thread(target=finish, daemon=True)
    thread.start()
    return thread, outcome


def test_a_finisher_slower_than_its_lease_keeps_the_session(db_url, tmp_path, monkeypatch):
    """A restore that outlasts the lease (many large files) renews it while it writes: another process finds the
    session held all along, not free halfway through. The lease here is 0.6 s and the finisher is held at the gate
    for over three of them."""
    from datetime import datetime, timedelta, timezone

    from chronicle.runtime.files_owed import OwedFinished
    from chronicle.runtime.leases import acquire, current_lease

    workspace, sid = interrupted_undo(db_url, tmp_path)
    gate = tmp_path / "finisher-gate"
    monkeypatch.setenv(TEST_HALT_ENV, str(gate))
    thread, outcome = finishing_in_a_thread(db_url, sid, "elsewhere:1:slow", lease_s=0.6)
    try:
        wait_for(lambda: gate.exists() or not thread.is_alive(), timeout=60)
        assert thread.is_alive(), outcome
        with closing(ChronicleStore(db_url)) as store:
            first_end = current_lease(store, UUID(sid)).expires_at  # type: ignore[union-attr]

            def outlasted_or_lapsed() -> bool:
                """The work outlasting the lease is what is tested: three lifetimes and more past its first end, as
                its renewals say (or the lease ran out meanwhile: the assertion below says so)."""
                end = current_lease(store, UUID(sid)).expires_at  # type: ignore[union-attr]
                return end >= first_end + timedelta(seconds=3 * 0.6) or end < datetime.now(timezone.utc)

            wait_for(outlasted_or_lapsed, timeout=60, interval=0.05)
            assert not acquire(store, UUID(sid), "elsewhere:2:other", 30.0), "the lease ran out while the files were written"
    finally:
        gate.unlink(missing_ok=True)
        thread.join(timeout=60)
    assert "error" not in outcome, outcome
    assert isinstance(outcome["done"], OwedFinished)
    assert (workspace / "win.txt").read_bytes() == b"one\ntwo\n" and owed(db_url, sid) is None


def test_a_finisher_whose_lease_was_taken_over_writes_and_records_nothing(db_url, tmp_path, monkeypatch):
    """A lease that went to another process while the finisher waited (here: its holder's process is dead, so the
    next one may take it at once) is confirmed before any file is written: the finisher says who holds it and
    leaves the files and the debt to them."""
    from chronicle.runtime.files_owed import OwedHeld
    from chronicle.runtime.leases import acquire

    workspace, sid = interrupted_undo(db_url, tmp_path)
    gone = processes.start([sys.executable, "-c", "pass"])
    gone.wait()
    gate = tmp_path / "finisher-gate"
    monkeypatch.setenv(TEST_HALT_ENV, str(gate))
    thread, outcome = finishing_in_a_thread(db_url, sid, f"{socket.gethostname()}:{gone.pid}:dead", lease_s=30.0)
    try:
        wait_for(lambda: gate.exists() or not thread.is_alive(), timeout=60)
        assert thread.is_alive(), outcome
        with closing(ChronicleStore(db_url)) as store:
            assert acquire(store, UUID(sid), "elsewhere:3:taker", 30.0)
    finally:
        gate.unlink(missing_ok=True)
        thread.join(timeout=60)
    assert "error" not in outcome, outcome
    held = outcome["done"]
    assert isinstance(held, OwedHeld) and held.holder == "elsewhere:3:taker", held
    assert (workspace / "win.txt").read_bytes() == b"uno\ndos\n" and (workspace / "new.txt").exists()  # untouched
    assert session_events(db_url, sid, "FilesRestored") == [] and owed(db_url, sid) is not None
