"""A forget made by another process holds against one already running (README, privacy).

Process A (a `Chronicle` opened through the library, as `serve`, a worker or a long `chat` hold
one) has read and written a session, so its data key is in A's memory. Process B (here a second
store object on the same database, as a second process has; the CLI in one test) forgets it. A's
next write into that tree is refused with "was forgotten" and records nothing, and its reads stop
within `TreeKeys.fresh_for`; the raw database holds no new plaintext of the session."""

from __future__ import annotations

import base64
import os
import time

import pytest

from chronicle import Agent, Chronicle, ChronicleError, ToolContext, tool
from tests.helpers import cli, response, text, tool_use, write_script
from tests.store_dump import dump_store, holds


@pytest.fixture
def cipher(monkeypatch):
    key = base64.b64encode(os.urandom(32)).decode()
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", key)
    return {"CHRONICLE_CIPHER_KEY": key}


def started(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("FIRST-ANSWER")), response(text("LATE-ANSWER"))])
    agent = Agent(provider=f"scripted:{script}")
    a = Chronicle(db_url)
    first = a.run_sync(agent, "FIRST-PROMPT", workspace=workspace)
    assert first.status == "completed", first.reason
    assert "FIRST-ANSWER" in str(a.history(first.session_id))  # A has read it: the key is in its memory
    return a, agent, first.session_id


def forget_elsewhere(db_url, sid):
    from chronicle.runtime.app.forget import forget

    b = Chronicle(db_url)
    try:
        forget(b.store, sid)
    finally:
        b.close()


def test_a_running_process_cannot_write_into_a_session_forgotten_by_another(db_url, workspace, tmp_path, cipher):
    a, agent, sid = started(db_url, workspace, tmp_path)
    forget_elsewhere(db_url, sid)
    for attempt in (lambda: a.run_sync(agent, "LATE-PROMPT", session=sid),
                    lambda: a.submit(agent, "QUEUED-PROMPT", session=sid),
                    lambda: a.steer(sid, "STEER-TEXT")):
        with pytest.raises(ChronicleError) as refused:
            attempt()
        assert "was forgotten" in str(refused.value), str(refused.value)
    a.close()
    assert cli("sessions", db=db_url, env=cipher).returncode == 0  # the read models (plaintext, README) caught up
    dump = dump_store(db_url)
    for marker in ("FIRST-PROMPT", "FIRST-ANSWER", "LATE-PROMPT", "LATE-ANSWER", "QUEUED-PROMPT", "STEER-TEXT"):
        assert not holds(dump, marker), f"{marker} is in the store"
    assert cli("verify", db=db_url, env=cipher).returncode == 0


def test_a_running_process_stops_reading_a_session_forgotten_by_another(db_url, workspace, tmp_path, cipher):
    a, agent, sid = started(db_url, workspace, tmp_path)
    done = cli("forget", sid, "--yes", db=db_url, env=cipher)  # a real second process
    assert done.returncode == 0, done.stderr
    keys = a.store.mapper.keys
    keys.clock = lambda: float("inf")  # past the bounded staleness of a cached key (`TreeKeys.fresh_for`)
    for read in (lambda: a.history(sid), lambda: a.log(sid)):
        with pytest.raises(ChronicleError) as refused:
            read()
        assert "was forgotten" in str(refused.value), str(refused.value)
    a.close()


def test_a_turn_running_when_its_session_is_forgotten_elsewhere_ends_and_leaks_nothing(db_url, workspace, tmp_path, cipher):
    """The tool's result and the model's answer after it are the turn's next events: refused, the turn
    ends (it cannot be recorded as failed: its events can no longer be written, which is the point),
    and the process goes on (`run_sync` answers, another session still runs)."""
    @tool(read_only=True)
    def erase_myself(ctx: ToolContext) -> str:
        """Forget this session from another process, then answer."""
        forget_elsewhere(db_url, ctx.session_id)
        return "TOOL-RESULT-AFTER-FORGET"

    script = write_script(tmp_path / "s.json", [response(tool_use("e", "erase_myself")), response(text("ANSWER-AFTER-FORGET"))])
    agent = Agent(tools=[erase_myself], provider=f"scripted:{script}")
    a = Chronicle(db_url)
    done = a.run_sync(agent, "PROMPT-OF-ERASED", workspace=workspace)
    assert done.status == "failed" and "was forgotten" in (done.reason or ""), (done.status, done.reason)
    assert "internal error" not in (done.reason or "")
    other_script = write_script(tmp_path / "other.json", [response(text("OTHER-ANSWER"))])
    other = a.run_sync(Agent(provider=f"scripted:{other_script}"), "ANOTHER-PROMPT", workspace=workspace)
    assert other.status == "completed", other.reason
    a.close()
    assert cli("sessions", db=db_url, env=cipher).returncode == 0  # the read models (plaintext, README) caught up
    dump = dump_store(db_url)
    for marker in ("PROMPT-OF-ERASED", "TOOL-RESULT-AFTER-FORGET", "ANSWER-AFTER-FORGET"):
        assert not holds(dump, marker), f"{marker} is in the store"
    assert holds(dump, "ANOTHER-PROMPT")
    assert cli("verify", db=db_url, env=cipher).returncode == 0


def test_a_server_refuses_inputs_and_stops_serving_a_session_forgotten_by_another_process(db_url, workspace, tmp_path, cipher):
    import httpx

    from tests.server.serving import serving

    script = write_script(tmp_path / "s.json", [response(text("SERVED-ANSWER")), response(text("LATE-SERVED-ANSWER"))])
    with serving(db_url, workspace, env_extra=cipher) as base:
        created = httpx.post(f"{base}/sessions", json={"prompt": "SERVED-PROMPT", "provider": f"scripted:{script}"}, timeout=30)
        assert created.status_code == 201, created.text
        sid = created.json()["session_id"]
        deadline = time.monotonic() + 60
        while "SERVED-ANSWER" not in httpx.get(f"{base}/sessions/{sid}/history", timeout=30).text:  # the server holds its key
            assert time.monotonic() < deadline, "the turn did not finish"
            time.sleep(0.1)
        done = cli("forget", sid, "--yes", db=db_url, env=cipher)
        assert done.returncode == 0, done.stderr
        refused = httpx.post(f"{base}/sessions/{sid}/inputs", json={"prompt": "LATE-SERVED-PROMPT"}, timeout=30)
        assert refused.status_code >= 400 and "was forgotten" in refused.json()["error"], refused.text
        steer = httpx.post(f"{base}/sessions/{sid}/steer", json={"message": "SERVED-STEER"}, timeout=30)
        assert steer.status_code >= 400 and "was forgotten" in steer.json()["error"], steer.text
        # Reads stop once the server's keys are no longer fresh (TreeKeys.fresh_for, 1 s after the forget).
        deadline = time.monotonic() + 60
        while (history := httpx.get(f"{base}/sessions/{sid}/history", timeout=30)).status_code < 400:
            assert time.monotonic() < deadline, f"still served a minute after the forget: {history.text[:300]}"
            time.sleep(0.1)
        assert "was forgotten" in history.json()["error"], history.text
        assert httpx.get(f"{base}/healthz", timeout=30).status_code == 200
    assert cli("sessions", db=db_url, env=cipher).returncode == 0  # the read models caught up
    dump = dump_store(db_url)
    for marker in ("SERVED-PROMPT", "SERVED-ANSWER", "LATE-SERVED-PROMPT", "LATE-SERVED-ANSWER", "SERVED-STEER"):
        assert not holds(dump, marker), f"{marker} is in the store"


def forget_in_flight(db_url, store, tree, hold_s):
    """Another process's forget, caught between its start and its commit: holding what `TreeKeys.destroy`
    holds (SQLite's write lock; on PostgreSQL the events table's lock and the key row's) for `hold_s`."""
    import sqlite3
    import threading

    import psycopg

    holding, done = threading.Event(), threading.Event()

    def forget():
        if db_url.startswith("sqlite"):
            conn = sqlite3.connect(db_url.removeprefix("sqlite:///"), isolation_level=None)
            conn.execute("BEGIN IMMEDIATE")
        else:
            from chronicle.runtime.config import eventsourcing_env

            env = eventsourcing_env(db_url)
            conn = psycopg.connect(dbname=env["POSTGRES_DBNAME"], host=env["POSTGRES_HOST"], port=env["POSTGRES_PORT"],
                                   user=env["POSTGRES_USER"])
            schema = store.recorder.datastore.schema or "public"
            conn.execute(f'LOCK TABLE "{schema}"."{store.recorder.events_table_name}" IN EXCLUSIVE MODE')
        marks = "?" if db_url.startswith("sqlite") else "%s"
        keys = store.mapper.keys._table()
        conn.execute(f"UPDATE {keys} SET wrapped = NULL, forgotten_at = {marks}, forgotten_by = {marks} "
                     f"WHERE tree_id = {marks}", ("2026-01-01T00:00:00+00:00", "test", str(tree)))
        holding.set()
        time.sleep(hold_s)
        conn.commit()
        conn.close()
        done.set()

    threading.Thread(target=forget, daemon=True).start()
    assert holding.wait(30)
    return done


def test_a_snapshot_taken_while_a_forget_commits_is_refused_in_its_own_transaction(db_url, workspace, tmp_path, cipher):
    """The snapshot's key check used to read the key row before the insert, in a transaction of its own:
    a forget committing between the two left a snapshot sealed with the destroyed key."""
    from uuid import UUID

    from chronicle.runtime.shred_marks import ForgottenContent

    a, agent, text_id = started(db_url, workspace, tmp_path)
    store, sid = a.store, UUID(text_id)
    store.take_snapshot(sid, version=1)  # while the key is alive, the guarded insert writes it
    before = {(r.originator_version) for r in store.snapshots.recorder.select_events(sid)}
    assert 1 in before
    done = forget_in_flight(db_url, store, sid, hold_s=0.5)
    with pytest.raises(ForgottenContent):
        store.take_snapshot(sid)
    assert done.wait(30)
    after = {(r.originator_version) for r in store.snapshots.recorder.select_events(sid)}
    assert after == before, "a snapshot was stored under the destroyed key"
    a.close()
