"""Secrets never reach the model or the store through a tool, on both backends (issue 17, Security)."""

from __future__ import annotations

import asyncio
import sqlite3
from typing import Any
from urllib.parse import urlparse

import psycopg
from pydantic import BaseModel

from chronicle.runtime.app.replay import replay
from chronicle.runtime.compression import SizedZlib
from chronicle.runtime.tools.base import Tool, ToolContext, ToolOutput
from tests.helpers import response, text, tool_use
from tests.integration.loop_harness import Harness

API_KEY = "sk-ant-api03-" + "Zq7" * 12
DSN_PASSWORD = "Pa/ss#w?rd42"
SERVICE_TOKEN = "svc-token-" + "x9" * 10


def stored_text(db_url: str) -> str:
    """Every row of every table of the store, as text (blobs as hex), read past the application; and
    every event and snapshot state decompressed (runtime/compression.py), so a compressed secret shows."""
    unpack = SizedZlib().decompress
    if db_url.startswith("sqlite:"):
        with sqlite3.connect(urlparse(db_url).path) as conn:
            states = [unpack(bytes(r[0])).decode() for t in ("stored_events", "stored_snapshots")
                      for r in conn.execute(f"SELECT state FROM {t}")]
            return "\n".join([*conn.iterdump(), *states])
    base, _, query = db_url.partition("?schema=")
    with psycopg.connect(base) as conn:
        tables = [r[0] for r in conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s", (query,))]
        assert tables
        states = [unpack(bytes(r[0])).decode() for t in tables if t.endswith(("_events", "_snapshots"))
                  for r in conn.execute(f'SELECT state FROM "{query}"."{t}"')]
        return "\n".join(
            [*(str(row[0]) for t in tables for row in conn.execute(f'SELECT row_to_json(t)::text FROM "{query}"."{t}" t')), *states]
        )


def leaked(secret: str, dump: str) -> bool:
    return secret in dump or secret.encode().hex() in dump.lower()


def test_bash_env_shows_no_runtime_secret_and_the_store_never_holds_one(db_url, tmp_path, monkeypatch):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text(f"the key is {API_KEY}\n", encoding="utf-8")
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    monkeypatch.setenv("CHRONICLE_DB", f"postgresql://chron:{DSN_PASSWORD}@127.0.0.1:5432/elsewhere")
    monkeypatch.setenv("MY_SERVICE_TOKEN", SERVICE_TOKEN)
    monkeypatch.setenv("CHRONICLE_TOOL_ENV", "MY_SERVICE_TOKEN")
    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("a", "bash", command="env; echo PWD-IS-$PWD"), tool_use("b", "read_file", path="notes.txt")),
        response(text("done")),
    ], auto_approve=True)
    outcome = h.run("show me the environment")
    assert outcome.status == "completed"
    env_result, note_result = (r.content for r in h.results())
    assert "PATH=" in env_result  # the command did run and print its environment
    assert "ANTHROPIC_API_KEY" not in env_result and "CHRONICLE_DB" not in env_result
    assert "MY_SERVICE_TOKEN=[REDACTED:environment]" in env_result  # passed through as configured, its value masked
    assert API_KEY not in note_result and "the key is [REDACTED:environment]" in note_result
    dump = stored_text(db_url)
    assert leaked("MY_SERVICE_TOKEN=[REDACTED:environment]", dump)  # the dump does hold the tool results
    for secret in (API_KEY, DSN_PASSWORD, SERVICE_TOKEN):
        assert not leaked(secret, dump), f"{secret!r} reached the store"


def test_error_results_name_paths_relative_to_the_workspace(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "plain.txt").write_text("a file, not a directory\n", encoding="utf-8")
    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("a", "write_file", path="plain.txt/inside.txt", content="x"),
                 tool_use("b", "read_file", path="../outside.txt"), tool_use("c", "list_dir", path="plain.txt")),
        response(text("done")),
    ])
    h.run("look")
    results = h.results()
    assert [r.is_error for r in results] == [True, True, True]
    assert "plain.txt" in results[0].content  # the OS error still says which path
    for result in results:
        assert str(tmp_path) not in result.content, result.content


class EchoesSecrets(Tool):
    """Stands for an MCP or user tool that prints what its process can see."""

    name = "echo_secrets"
    description = "prints secrets"

    class Input(BaseModel):
        pass

    async def run(self, args: Any, ctx: ToolContext) -> ToolOutput:
        leak = f"key={API_KEY} dsn=postgresql://u:{DSN_PASSWORD}@db/x"
        return ToolOutput(leak, blocks=[{"type": "text", "text": leak}, {"type": "structured", "content": {"n": 1}}])


def test_rich_results_of_any_tool_are_redacted_before_they_are_recorded(db_url, tmp_path, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    h = Harness(db_url, tmp_path, tmp_path, [response(tool_use("a", "echo_secrets")), response(text("done"))])
    h.loop.toolbox.tools["echo_secrets"] = EchoesSecrets()
    assert h.run("go").status == "completed"
    dump = stored_text(db_url)
    assert leaked("dsn=postgresql://u:[REDACTED:url-password]@db/x", dump)
    assert not leaked(API_KEY, dump) and not leaked(DSN_PASSWORD, dump)


def test_replay_compares_a_rerun_result_as_it_was_recorded_redacted_and_with_relative_paths(db_url, tmp_path):
    workspace = tmp_path / "ws"
    workspace.mkdir()
    (workspace / "notes.txt").write_text(f"the key is {API_KEY}\n", encoding="utf-8")
    (workspace / "plain.txt").write_text("a file, not a directory\n", encoding="utf-8")
    h = Harness(db_url, workspace, tmp_path, [
        response(tool_use("a", "read_file", path="notes.txt"), tool_use("b", "list_dir", path="plain.txt")), response(text("done")),
    ])
    assert h.run("look").status == "completed"
    assert "[REDACTED:anthropic-key]" in h.results()[0].content
    report = asyncio.run(replay(h.store, h.session_id))
    assert report.divergence is None and report.rechecked == 2, report.verdict()

    (workspace / "notes.txt").write_text(f"the key was {API_KEY}\n", encoding="utf-8")
    changed = asyncio.run(replay(h.store, h.session_id))
    assert changed.divergence is not None and API_KEY not in changed.verdict()
    assert changed.divergence.detail == ("read_file (a) returned 'the key was [REDACTED:anthropic-key]', "
                                         "recorded 'the key is [REDACTED:anthropic-key]'")
