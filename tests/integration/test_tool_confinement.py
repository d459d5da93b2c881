"""Every file tool and every walk keeps to the workspace and away from the store (issue 17)."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path
from typing import Any

import pytest

from chronicle.runtime.tools import BUILTIN_TOOLS
from chronicle.runtime.tools.base import ToolContext, ToolError, ToolOutput


def call(ctx: ToolContext, name: str, **args: Any) -> ToolOutput:
    tool = BUILTIN_TOOLS[name]()
    return asyncio.run(tool.run(tool.parse(args), ctx))


def refused(ctx: ToolContext, name: str, **args: Any) -> str:
    with pytest.raises(ToolError) as info:
        call(ctx, name, **args)
    return str(info.value)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret = tmp_path / "outside"
    secret.mkdir()
    (secret / "secret.txt").write_text("TOP-SECRET line\n", encoding="utf-8")
    return secret


@pytest.fixture
def ws(tmp_path: Path, outside: Path) -> Path:
    root = tmp_path / "ws"
    (root / "src").mkdir(parents=True)
    (root / "top.txt").write_text("hello top\n", encoding="utf-8")
    (root / "src" / "deep.txt").write_text("hello deep\n", encoding="utf-8")
    (root / "link.txt").symlink_to(outside / "secret.txt")
    (root / "linkdir").symlink_to(outside)
    return root


def test_walks_never_follow_links_out_of_the_workspace(ws: Path):
    ctx = ToolContext(workspace=ws)
    assert "outside the workspace" in refused(ctx, "read_file", path="link.txt")
    assert call(ctx, "grep", pattern="TOP-SECRET").content == "no matches"
    assert "outside the workspace" in refused(ctx, "grep", pattern="TOP", path="linkdir")
    found = call(ctx, "glob", pattern="**/*.txt").content.splitlines()
    assert found == ["src/deep.txt", "top.txt"]
    listing = call(ctx, "list_dir").content.splitlines()
    assert listing == ["link.txt@", "linkdir@", "src/", "top.txt"]


def test_glob_follows_pathlib_semantics(ws: Path):
    ctx = ToolContext(workspace=ws)
    assert call(ctx, "glob", pattern="*.txt").content == "top.txt"
    assert call(ctx, "glob", pattern="**/*.txt").content.splitlines() == ["src/deep.txt", "top.txt"]
    assert call(ctx, "glob", pattern="src/**").content == "src/deep.txt"
    assert call(ctx, "glob", pattern="*/deep.txt").content == "src/deep.txt"


@pytest.mark.parametrize("store_in_workspace", [".chronicle/chronicle.db", "data/my-store.db"])
def test_every_tool_refuses_the_event_store(ws: Path, store_in_workspace: str):
    db = ws / store_in_workspace
    db.parent.mkdir(parents=True, exist_ok=True)
    db.write_bytes(b"SQLite format 3\x00events")
    Path(f"{db}-wal").write_bytes(b"wal")
    os.link(db, ws / "innocent.db")  # a hard link is the same file
    ctx = ToolContext(workspace=ws, store_url=f"sqlite:///{db}")
    rel = store_in_workspace
    for name, args in [
        ("read_file", {"path": rel}), ("read_file", {"path": f"{rel}-wal"}), ("read_file", {"path": "innocent.db"}),
        ("write_file", {"path": rel, "content": "x"}), ("write_file", {"path": ".chronicle/new.db", "content": "x"}),
        ("edit_file", {"path": f"{rel}-wal", "old": "wal", "new": "x"}), ("list_dir", {"path": ".chronicle"}),
        ("grep", {"pattern": "events", "path": rel}),
    ]:
        assert "event store" in refused(ctx, name, **args), (name, args)
    assert db.read_bytes() == b"SQLite format 3\x00events"
    if rel.startswith("data/"):
        assert "my-store.db" not in call(ctx, "list_dir", path="data").content
    assert "innocent.db" not in call(ctx, "list_dir").content
    assert call(ctx, "grep", pattern="events|wal").content == "no matches"
    assert ".db" not in call(ctx, "glob", pattern="**/*").content


def test_the_configuration_can_be_read_but_not_rewritten_by_a_tool(ws: Path):
    (ws / "chronicle.toml").write_text("[limits]\nmax_tool_calls = 3\n", encoding="utf-8")
    ctx = ToolContext(workspace=ws)
    assert "max_tool_calls" in call(ctx, "read_file", path="chronicle.toml").content
    assert "chronicle.toml" in refused(ctx, "write_file", path="chronicle.toml", content="[limits]\n")
    assert "chronicle.toml" in refused(ctx, "edit_file", path="./chronicle.toml", old="3", new="100000")
    assert (ws / "chronicle.toml").read_text(encoding="utf-8").endswith("= 3\n")


def test_undecodable_file_names_are_entries_not_failures(ws: Path):
    name = os.fsdecode(b"caf\xe9.txt")
    (ws / name).write_text("bonjour\n", encoding="utf-8")
    ctx = ToolContext(workspace=ws)
    assert "caf\\xe9.txt" in call(ctx, "list_dir").content.splitlines()
    assert "caf\\xe9.txt" in call(ctx, "glob", pattern="*.txt").content.splitlines()
    assert call(ctx, "grep", pattern="bonjour").content == "caf\\xe9.txt:1:bonjour"
    assert call(ctx, "read_file", path="caf\\xe9.txt").content == "bonjour"  # the name as shown opens the file
    for out in (call(ctx, "list_dir").content, call(ctx, "glob", pattern="**/*").content):
        out.encode("utf-8")  # storable and sendable: no lone surrogates


def test_edits_keep_the_exact_bytes_and_record_them(ws: Path):
    crlf = ws / "win.txt"
    crlf.write_bytes(b"\xef\xbb\xbfone\r\ntwo\r\nthree")  # BOM, CRLF, no final newline
    ctx = ToolContext(workspace=ws)
    out = call(ctx, "edit_file", path="win.txt", old="one\ntwo", new="uno\ndos")
    assert crlf.read_bytes() == b"\xef\xbb\xbfuno\r\ndos\r\nthree"
    effect = out.effects[0]
    assert effect["before"].encode() == b"\xef\xbb\xbfone\r\ntwo\r\nthree"
    assert effect["after"].encode() == crlf.read_bytes()


def test_binary_and_non_utf8_files_are_refused_alike(ws: Path):
    (ws / "blob.bin").write_bytes(b"\x00\x01hello\x00")
    (ws / "latin.txt").write_bytes("caf\xe9 hello\n".encode("latin-1"))
    ctx = ToolContext(workspace=ws)
    assert "binary" in refused(ctx, "read_file", path="blob.bin")
    assert "binary" in refused(ctx, "edit_file", path="blob.bin", old="hello", new="x")
    assert "binary" in refused(ctx, "write_file", path="blob.bin", content="x")
    assert "not UTF-8" in refused(ctx, "edit_file", path="latin.txt", old="hello", new="x")
    assert "not UTF-8" in refused(ctx, "write_file", path="latin.txt", content="x")
    assert (ws / "latin.txt").read_bytes() == "caf\xe9 hello\n".encode("latin-1")
    assert "hello" in call(ctx, "read_file", path="latin.txt").content
    assert call(ctx, "grep", pattern="caf", path=".").content.splitlines() == ["latin.txt:1:caf\ufffd hello"]


def test_a_write_replaces_the_entry_and_leaves_a_hard_linked_file_alone(ws: Path, outside: Path):
    shared = ws / "shared.txt"
    os.link(outside / "secret.txt", shared)
    ctx = ToolContext(workspace=ws)
    call(ctx, "write_file", path="shared.txt", content="mine now\n")
    assert shared.read_text(encoding="utf-8") == "mine now\n"
    assert (outside / "secret.txt").read_text(encoding="utf-8") == "TOP-SECRET line\n"
