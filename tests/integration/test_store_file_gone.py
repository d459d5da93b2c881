"""An SQLite store's file deleted or replaced under a process that has it open: the process's saves are refused,
not written into a file no path names any more.

Tried as a user would (`rm -rf .chronicle` to start afresh, a server still running in another terminal):
`chronicle serve` answered 201 to a new session after its store was deleted, and the session was gone when
the server stopped, as was everything it recorded since. Now the save raises `StoreFileGone` before its commit
and the server answers 503 naming the file. (A write within a save that is already committing when the file goes
is the only one that can still land in the deleted file.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from chronicle import Chronicle, ChronicleError
from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.sqlite_pool import StoreFileGone
from chronicle.runtime.store import ChronicleStore
from tests import processes
from tests.helpers import response, text, write_script
from tests.recovery import wait_for
from tests.server.serving import server_process

SPEC = AgentSpec(name="main", provider="fake", model="m")


def _remove_store(path: Path) -> None:
    for name in (path.name, f"{path.name}-wal", f"{path.name}-shm"):
        (path.parent / name).unlink(missing_ok=True)


def test_a_save_into_a_deleted_store_file_is_refused_and_names_it(tmp_path):
    path = tmp_path / "chronicle.db"
    with closing(ChronicleStore(f"sqlite:///{path}")) as store:
        session, _ = start_session(store, SPEC, "hello")
        _remove_store(path)
        with pytest.raises(StoreFileGone) as gone:
            submit_input(store, session.id, "and then")
        assert str(path) in str(gone.value) and "restart" in str(gone.value)
    assert not path.exists()


def test_a_save_into_a_store_file_replaced_by_another_is_refused_and_writes_neither(tmp_path):
    path, other = tmp_path / "chronicle.db", tmp_path / "other.db"
    with closing(ChronicleStore(f"sqlite:///{other}")) as elsewhere:
        start_session(elsewhere, SPEC, "the other store's")
        before = elsewhere.max_position()
    with closing(ChronicleStore(f"sqlite:///{path}")) as store:
        session, _ = start_session(store, SPEC, "hello")
        ours = store.max_position()
        shutil.copy(other, tmp_path / "copy.db")
        os.replace(tmp_path / "copy.db", path)  # a backup restored by a rename, the store still open
        with pytest.raises(StoreFileGone):
            submit_input(store, session.id, "and then")
    with closing(ChronicleStore(f"sqlite:///{path}")) as reopened:
        assert reopened.max_position() == before != ours + 1


def test_the_server_answers_503_not_201_for_a_session_it_could_not_keep(tmp_path, workspace):
    store_dir = tmp_path / "store"
    store_dir.mkdir()
    path = store_dir / "chronicle.db"
    script = write_script(tmp_path / "s.json", [response(text("Hello.")), response(text("Again."))])
    body = {"prompt": "hi", "provider": f"scripted:{script}"}
    with server_process(f"sqlite:///{path}", workspace) as (base, _):
        assert httpx.post(f"{base}/sessions", json=body, timeout=30).status_code == 201
        assert httpx.get(f"{base}/healthz", timeout=30).json()["status"] == "ok"
        shutil.rmtree(store_dir)  # `rm -rf` of the store's directory, the server still running
        refused = httpx.post(f"{base}/sessions", json=body, timeout=30)
        assert refused.status_code == 503, refused.text
        assert str(path) in refused.json()["error"] and "deleted or replaced" in refused.json()["error"]
        stale = httpx.get(f"{base}/sessions", timeout=30)  # a read too: the old file's sessions are no answer now
        assert stale.status_code == 503 and "deleted or replaced" in stale.json()["error"], stale.text
        health = httpx.get(f"{base}/healthz", timeout=30)  # a supervisor restarts it: nothing else cures it
        assert health.status_code == 503 and health.json()["status"] == "store_gone"
        assert "deleted or replaced" in health.json()["error"]


def test_a_worker_whose_store_file_is_deleted_stops_and_says_why_not_idling_on_it(tmp_path, workspace):
    """Its passes read the file it opened, which no command writes to any more: it would have idled there for
    ever, seeing none of the work queued in the new store at that path."""
    path = tmp_path / "store" / "chronicle.db"
    path.parent.mkdir()
    env = {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}, "CHRONICLE_DB": f"sqlite:///{path}"}
    with closing(ChronicleStore(f"sqlite:///{path}")):
        pass
    worker = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "worker", "--poll", "0.1"],
                             env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: (path.parent / f"{path.name}-wal").exists(), timeout=30)  # it has the store open
    shutil.rmtree(path.parent)
    _, stderr = worker.communicate(timeout=30)
    assert worker.returncode == 1, stderr
    assert f"stopping: the store file {path} was deleted or replaced" in stderr and "restart" in stderr


def test_a_programs_worker_raises_when_its_store_file_is_deleted(tmp_path):
    path = tmp_path / "chronicle.db"
    raised: list[BaseException] = []
    with Chronicle(f"sqlite:///{path}") as app:
        app.store  # noqa: B018 - opened (created) before the worker starts, as a program's first call does
        thread = threading.Thread(target=lambda: _capture(raised, lambda: app.work(poll=0.05)))
        thread.start()
        wait_for(lambda: (tmp_path / "chronicle.db-wal").exists(), timeout=30)
        _remove_store(path)
        thread.join(timeout=30)
    assert len(raised) == 1 and isinstance(raised[0], ChronicleError) and raised[0].code == 1
    assert "was deleted or replaced" in str(raised[0])


def _capture(into: list[BaseException], call) -> None:
    try:
        call()
    except BaseException as exc:  # noqa: BLE001 - the test reads it
        into.append(exc)


def test_chat_says_the_store_is_unavailable_in_one_line_not_an_internal_error(tmp_path, workspace):
    """It said `chronicle: internal error: StoreFileGone: …` and asked for a bug report."""
    path = tmp_path / "store" / "chronicle.db"
    path.parent.mkdir()
    script = write_script(tmp_path / "s.json", [response(text("first answer")), response(text("second"))])
    env = {**{k: v for k, v in os.environ.items() if k != "ANTHROPIC_API_KEY"}, "CHRONICLE_DB": f"sqlite:///{path}"}
    chat = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "chat", "--provider", f"scripted:{script}",
                            "--workspace", str(workspace)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    assert chat.stdin is not None
    chat.stdin.write("hello\n")
    chat.stdin.flush()

    def answered() -> bool:
        if not path.exists():
            return False
        with closing(ChronicleStore(f"sqlite:///{path}")) as store:
            ids = store.session_ids()
            return bool(ids) and [t.status for t in store.head_turns(store.session(ids[0]))] == ["completed"]

    wait_for(answered, timeout=60)
    shutil.rmtree(path.parent)
    out, err = chat.communicate("again\n", timeout=60)
    assert chat.returncode == 1, (out, err)
    said = [line for line in (out + err).splitlines() if "unavailable" in line or "internal error" in line]
    assert len(said) == 1 and "error: the store is unavailable: the store file" in said[0], said
