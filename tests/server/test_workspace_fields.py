"""Workspace fields an HTTP request gave that were recorded or accepted and then not used. A real server, both backends."""

from __future__ import annotations

from pathlib import Path

import httpx

from tests.helpers import response, text, write_script
from tests.server.serving import serving, sse


def test_a_session_started_over_http_in_another_workspace_runs_there_not_in_the_servers(db_url, workspace, tmp_path):
    """`serve --workspace` is the default of sessions started over HTTP; its worker ran every session there, so a
    request's own `workspace` was recorded and then ignored: the agent read and wrote the server's directory."""
    other = tmp_path / "other"
    other.mkdir()
    script = write_script(tmp_path / "s.json", [
        response({"type": "tool_use", "id": "t1", "name": "write_file", "input": {"path": "out.txt", "content": "here"}}),
        response(text("written")),
    ])
    with serving(db_url, workspace) as base:
        created = httpx.post(f"{base}/sessions", json={"prompt": "write", "provider": f"scripted:{script}",
                                                        "workspace": str(other)})
        assert created.status_code == 201, created.text
        assert sse(base, f"/sessions/{created.json()['session_id']}/events")[-1][1]["status"] == "completed"
    assert (other / "out.txt").read_text(encoding="utf-8") == "here"
    assert not (workspace / "out.txt").exists()


def test_undo_over_http_puts_files_back_in_the_workspace_its_body_names(db_url, workspace, tmp_path):
    """`{"workspace": DIR}` of POST /undo was accepted and ignored: the files went back where the session recorded."""
    moved = tmp_path / "moved"
    script = write_script(tmp_path / "s.json", [
        response({"type": "tool_use", "id": "t1", "name": "write_file", "input": {"path": "hello.txt", "content": "changed"}}),
        response(text("changed it")),
    ])
    with serving(db_url, workspace) as base:
        sid = httpx.post(f"{base}/sessions", json={"prompt": "change", "provider": f"scripted:{script}"}).json()["session_id"]
        assert sse(base, f"/sessions/{sid}/events")[-1][1]["status"] == "completed"
        workspace.rename(moved)  # the project moved since: its files are elsewhere now
        workspace.mkdir()
        undone = httpx.post(f"{base}/sessions/{sid}/undo", json={"files": True, "workspace": str(moved)})
        assert undone.status_code == 200, undone.text
    assert Path(moved / "hello.txt").read_text(encoding="utf-8") == "hello world\nsecond line\n"
    assert not (workspace / "hello.txt").exists()
