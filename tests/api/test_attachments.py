"""Attachments from the API: images and PDFs go out as blocks, their bytes stored once and referenced by the events."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from tests.helpers import cli, json_lines
from tests.sse_server import reply, sse  # noqa: F401

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 24 + b"not really pixels"
PDF = b"%PDF-1.4\n%fake but well-typed\n"


def test_images_and_pdfs_reach_the_messages_api_as_blocks_and_are_stored_once(db_url, workspace, sse, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-attachments")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", sse.url)
    (workspace / "chart.png").write_bytes(PNG)
    sse.script(reply([{"type": "text", "text": "A chart and a report."}]), reply([{"type": "text", "text": "Same chart."}]))
    agent = Agent(name="main", tools=["read_file"], provider="anthropic", model="claude-sonnet-4-6")
    app = Chronicle(db_url)
    first = app.run_sync(agent, "What are these?", workspace=workspace,
                         attachments=[workspace / "chart.png", (PDF, "application/pdf")])
    assert first.status == "completed", first.reason
    second = app.run_sync(agent, "And this one?", session=first.session_id, attachments=[(PNG, "image/png")])
    assert second.status == "completed", second.reason

    sent = sse.requests[0].body["messages"][0]["content"]
    assert sent[0] == {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": base64.b64encode(PNG).decode()}}
    assert sent[1] == {"type": "document", "source": {"type": "base64", "media_type": "application/pdf",
                                                      "data": base64.b64encode(PDF).decode()}}
    assert sent[2]["type"] == "text" and sent[2]["text"] == "What are these?"
    # the second request sends the whole history again, bytes included, from the one stored copy
    again = sse.requests[1].body["messages"]
    assert again[0]["content"][0]["source"]["data"] == base64.b64encode(PNG).decode()
    assert again[2]["content"][0]["source"]["data"] == base64.b64encode(PNG).decode()

    history = json_lines(cli("history", first.session_id, "--json", db=db_url).stdout)
    image = history[0]["content"][0]
    assert image["type"] == "image" and image["source"]["type"] == "attachment" and image["source"]["name"] == "chart.png"
    assert "data" not in image["source"]  # events hold references, not a copy of the bytes per message
    stored = app.store.recorder.select_events(
        __import__("chronicle.domain.ids", fromlist=["attachment_id"]).attachment_id(image["source"]["sha256"]))
    assert len(stored) == 1  # the same PNG twice: stored once
    log = json_lines(cli("log", first.session_id, "--json", db=db_url).stdout)
    assert "A0KGgo" not in json.dumps(log)  # no base64 of the PNG in the session's own events
    for query in (("audit", "--json"), ("cost", "--json"), ("sessions", "--json")):  # projections pass attachments by
        assert cli(*query, db=db_url).returncode == 0
    app.close()


def test_a_file_chronicle_cannot_send_records_nothing(db_url, workspace, tmp_path):
    (workspace / "notes.txt").write_text("plain text", encoding="utf-8")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [{"content": [{"type": "text", "text": "x"}]}]}}), encoding="utf-8")
    app = Chronicle(db_url)
    agent = Agent(provider=f"scripted:{script}")
    for bad in ([workspace / "notes.txt"], [workspace / "missing.png"], [(b"abc", "text/plain")]):
        with pytest.raises(ChronicleError) as caught:
            app.run_sync(agent, "look", workspace=workspace, attachments=bad)
        assert caught.value.code == 2 and "\n" not in str(caught.value)
    assert json_lines(cli("sessions", "--json", db=db_url).stdout) == []
    app.close()


WEBP = b"RIFF\x24\x00\x00\x00WEBPVP8 " + b"\x00" * 16
JPEG = b"\xff\xd8\xff\xe0\x00\x10JFIF\x00"


@pytest.mark.parametrize("data, said, holds", [
    (b"abc", "image/png", "none of the kinds Chronicle sends (it begins b'abc')"),
    (PDF, "image/png", "application/pdf"),
    (PNG, "application/pdf", "image/png"),  # a document's type was never checked against its bytes
    (JPEG, "image/webp", "image/jpeg"),
    (WEBP, "image/gif", "image/webp"),
])
def test_bytes_that_are_not_what_their_media_type_says_are_refused_recording_nothing(db_url, workspace, tmp_path,
                                                                                     data, said, holds):
    """A pair's bytes were taken on its word: `(b"abc", "image/png")` was recorded as an image, and the Messages API
    then refused the request (400) with the input recorded. Refused as the path form refuses a file it cannot send."""
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [{"content": [{"type": "text", "text": "x"}]}]}}), encoding="utf-8")
    app = Chronicle(db_url)
    agent = Agent(provider=f"scripted:{script}")
    with pytest.raises(ChronicleError) as caught:
        app.run_sync(agent, "look", workspace=workspace, attachments=[(PNG, "image/png"), (data, said)])
    message = str(caught.value)
    assert caught.value.code == 2 and "\n" not in message
    assert message.startswith(f"attachment of {len(data)} bytes says {said} but holds {holds};"), message
    assert json_lines(cli("sessions", "--json", db=db_url).stdout) == []
    for good in (PNG, "image/png"), (PDF, "application/pdf"), (JPEG, "image/jpeg"), (WEBP, "image/webp"):
        assert app.run_sync(agent, "look", workspace=workspace, attachments=[good]).status == "completed"
    app.close()


def test_run_attach_sends_the_files_and_a_bad_one_exits_2_recording_nothing(sqlite_url, workspace, sse, monkeypatch):
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-attachments")
    (workspace / "chart.png").write_bytes(PNG)
    (workspace / "report.pdf").write_bytes(PDF)
    (workspace / "notes.txt").write_text("text", encoding="utf-8")
    sse.script(reply([{"type": "text", "text": "seen"}]))
    env = {"ANTHROPIC_API_KEY": "sk-ant-test-attachments", "ANTHROPIC_BASE_URL": sse.url}
    bad = cli("run", "look", "--provider", "anthropic", "--workspace", str(workspace), "--attach", str(workspace / "notes.txt"),
              db=sqlite_url, env=env)
    assert bad.returncode == 2 and "notes.txt" in bad.stderr
    assert not Path(sqlite_url.removeprefix("sqlite:///")).exists()  # checked before the store is made: none left behind
    assert json_lines(cli("sessions", "--json", db=sqlite_url).stdout) == []
    run = cli("run", "look", "--provider", "anthropic", "--workspace", str(workspace), "--attach", str(workspace / "chart.png"),
              "--attach", str(workspace / "report.pdf"), db=sqlite_url, env=env)
    assert run.returncode == 0, run.stderr
    blocks = sse.requests[0].body["messages"][0]["content"]
    assert [b["type"] for b in blocks] == ["image", "document", "text"]
    assert blocks[1]["source"]["data"] == base64.b64encode(PDF).decode()
