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
from contextlib import closing
from pathlib import Path

import httpx
import pytest

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.sqlite_pool import StoreFileGone
from chronicle.runtime.store import ChronicleStore
from tests.helpers import response, text, write_script
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
        shutil.rmtree(store_dir)  # `rm -rf` of the store's directory, the server still running
        refused = httpx.post(f"{base}/sessions", json=body, timeout=30)
        assert refused.status_code == 503, refused.text
        assert str(path) in refused.json()["error"] and "deleted or replaced" in refused.json()["error"]
