"""A forgotten session gets one answer everywhere: one line saying it was forgotten (by `chronicle
forget`) and when, exit 1 in every CLI command that reads or writes it, `ChronicleError` code 1 in the
library, HTTP 409 from the server; whether this process read it before the forget or never did.

A fresh process used to find it through the id lookup and call it a usage error (exit 2, HTTP 400),
while a process that had read it before got exit 1: a script could not tell one answer from the other."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from tests.helpers import cli, json_lines, response, text, write_script
from tests.store_copies import built_once

COMMANDS = [
    ["history", "{sid}"], ["log", "{sid}"], ["cost", "{sid}"], ["export", "{sid}"], ["model", "{sid}"],
    ["run", "again", "--session", "{sid}", "--provider", "scripted:{script}"], ["submit", "later", "--session", "{sid}"],
    ["steer", "{sid}", "go left"], ["cancel", "{sid}"], ["approve", "{sid}"], ["deny", "{sid}"], ["resume", "{sid}"],
    ["undo", "{sid}"], ["fork", "{sid}", "--at", "1"], ["archive", "{sid}"], ["forget", "{sid}", "--yes"],
]


def forget_one(url: str, workspace: Path, folder: Path, key: str) -> dict:
    """A session recorded and read by a process still running (`running`, for the caller to close), then forgotten
    by `chronicle forget`. CHRONICLE_CIPHER_KEY must be `key` in this process too."""
    env = {"CHRONICLE_CIPHER_KEY": key}
    script = write_script(folder / "s.json", [response(text("FIRST")), response(text("SECOND"))])
    agent = Agent(provider=f"scripted:{script}")
    running = Chronicle(url)  # a process that read the session before the forget
    sid = running.run_sync(agent, "hello", workspace=workspace).session_id
    assert "FIRST" in str(running.history(sid))
    done = cli("forget", sid, "--yes", "--json", db=url, env=env)
    assert done.returncode == 0, done.stderr
    at = json_lines(done.stdout)[0]["forgotten_at"]
    return {"sid": sid, "at": at, "env": env, "script": script, "agent": agent, "running": running}


@pytest.fixture
def forgotten(db_url, workspace, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """A forgotten session and the process that read it before: for the test of that process, built for it alone."""
    key = base64.b64encode(os.urandom(32)).decode()
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", key)
    f = forget_one(db_url, workspace, tmp_path, key)
    yield f
    f["running"].close()


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def forgotten_source(request, tmp_path_factory):  # type: ignore[no-untyped-def]
    """A forgotten session as `forgotten` makes it, built once per backend (tests/store_copies.py); the process
    that read it is closed before any test runs."""
    with built_once(request, tmp_path_factory, "forgotten") as source, pytest.MonkeyPatch.context() as env:
        key = base64.b64encode(os.urandom(32)).decode()
        env.setenv("CHRONICLE_CIPHER_KEY", key)
        f = forget_one(source.url, source.workspace, source.root, key)
        f.pop("running").close()
        source.sealed()
        yield source, f


@pytest.fixture
def forgotten_copy(forgotten_source, tmp_path, monkeypatch):  # type: ignore[no-untyped-def]
    """The forgotten session in a store of this test's own (`url`), and the workspace it was recorded in, shared
    (`workspace`, checked untouched)."""
    source, f = forgotten_source
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", f["env"]["CHRONICLE_CIPHER_KEY"])
    yield {**f, "url": source.copy(tmp_path), "workspace": source.workspace}
    source.untouched_workspace()


def said_forgotten(message: str, at: str) -> bool:
    return "was forgotten on" in message and at in message and "chronicle forget" in message


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0])
def test_every_command_on_a_forgotten_session_exits_1_with_one_line_saying_when(forgotten_copy, command):
    f = forgotten_copy
    db_url, workspace = f["url"], f["workspace"]
    args = [a.format(sid=f["sid"], script=f["script"]) for a in command]
    done = cli(*args, db=db_url, env=f["env"], cwd=workspace)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 1, (args, done.returncode, done.stderr)
    assert len(lines) == 1 and lines[0].startswith("error:") and said_forgotten(lines[0], f["at"]), done.stderr
    prefix = cli(command[0], f["sid"][:8], *args[2:], db=db_url, env=f["env"], cwd=workspace) if command[0] == "history" else None
    if prefix is not None:  # the prefix `audit` shows on the forget row answers as the full id does
        assert prefix.returncode == 1 and said_forgotten(prefix.stderr, f["at"]), prefix.stderr


def test_the_library_raises_code_1_whether_or_not_it_read_the_session_before(forgotten, db_url):
    f = forgotten
    fresh = Chronicle(db_url)
    try:
        for app in (fresh, f["running"]):
            f["running"].store.mapper.keys.clock = lambda: float("inf")  # past the cached key's `fresh_for`
            for call in (lambda a: a.history(f["sid"]), lambda a: a.log(f["sid"]),
                         lambda a: a.run_sync(f["agent"], "again", session=f["sid"]), lambda a: a.steer(f["sid"], "x")):
                with pytest.raises(ChronicleError) as refused:
                    call(app)
                assert refused.value.code == 1 and said_forgotten(str(refused.value), f["at"]), str(refused.value)
    finally:
        fresh.close()


def test_the_server_answers_409_to_reads_and_writes_of_a_forgotten_session(forgotten_copy):
    from starlette.testclient import TestClient

    f = forgotten_copy
    db_url = f["url"]
    with TestClient(Chronicle(db_url).http_app(run_worker=False)) as client:
        sid = f["sid"]
        for method, path, body in (("get", f"/sessions/{sid}/history", None), ("get", f"/sessions/{sid}/log", None),
                                   ("post", f"/sessions/{sid}/inputs", {"prompt": "again"}),
                                   ("post", f"/sessions/{sid}/steer", {"message": "x"}), ("get", f"/ui/sessions/{sid}", None)):
            answer = client.request(method, path, json=body)
            assert answer.status_code == 409, (path, answer.status_code, answer.text)
            if path.startswith("/sessions"):
                assert said_forgotten(answer.json()["error"], f["at"]) and answer.json()["code"] == 1, answer.text
