"""A stdio MCP server's stderr log sits in the shared temporary directory and can hold what the server's
`env` gave it (a traceback with a token): it is this user's alone (runtime/tools/mcp_hub.py)."""

from __future__ import annotations

import os
import stat
import tempfile

import pytest

from chronicle.runtime.tools.mcp_config import McpServerConfig
from chronicle.runtime.tools.mcp_hub import HUB, stderr_log
from tests.integration.test_mcp_tools import session_with, stdio_table


@pytest.fixture(autouse=True)
def own_tmp(tmp_path, monkeypatch):
    shared = tmp_path / "shared-tmp"
    shared.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    umask = os.umask(0o022)  # the usual one: a file opened without a mode of its own comes out 0644
    yield shared
    os.umask(umask)
    HUB.close()


def mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


def test_a_servers_log_is_created_0600_and_an_older_world_readable_one_is_tightened(sqlite_url, workspace, tmp_path, own_tmp):
    (workspace / "chronicle.toml").write_text(stdio_table("fresh") + stdio_table("older"), encoding="utf-8")
    older = own_tmp / stderr_log(McpServerConfig(name="older", command="x")).name
    older.write_text("a line from yesterday\n", encoding="utf-8")
    os.chmod(older, 0o644)
    session_with(sqlite_url, workspace, tmp_path, [[]])  # lists the tools: both servers start
    fresh = own_tmp / stderr_log(McpServerConfig(name="fresh", command="x")).name
    assert fresh.exists() and mode(fresh) == 0o600, oct(mode(fresh))
    assert mode(older) == 0o600 and older.read_text(encoding="utf-8").startswith("a line from yesterday\n")  # appended to


def test_a_link_or_another_users_file_in_its_place_is_refused_and_left_alone(tmp_path):
    from chronicle.runtime.tools.mcp_hub import open_stderr_log

    target = tmp_path / "elsewhere.log"
    target.write_text("theirs\n", encoding="utf-8")
    link = tmp_path / "chronicle-mcp-x-0.log"
    link.symlink_to(target)
    with pytest.raises(OSError):
        open_stderr_log(link)
    assert target.read_text(encoding="utf-8") == "theirs\n"
    if os.getuid() != 0:
        pytest.skip("giving a file to another user needs root")
    planted = tmp_path / "chronicle-mcp-y-0.log"
    planted.write_text("", encoding="utf-8")
    os.chmod(planted, 0o666)
    os.chown(planted, 4321, 4321)
    with pytest.raises(PermissionError, match="belongs to another user"):
        open_stderr_log(planted)
    assert mode(planted) == 0o666
