"""What a session or the server accepts and does not use, told to an HTTP client in the answer (`notes`), as the
library returns it on RunResult.notes: before, `chronicle serve` only logged it. A real server process, both backends."""

from __future__ import annotations

import httpx

from tests.chat_sse_server import chat_reply, chat_sse  # noqa: F401 - a fixture
from tests.helpers import response, text, write_script
from tests.server.serving import serving, sse

THINKING = ("note: CHRONICLE_THINKING_TOKENS=2048 ignored: provider openai-compatible takes no thinking budget "
            "(the server decides on reasoning); it applies to anthropic sessions only")


def test_chronicle_thinking_tokens_ignored_for_a_session_is_a_note_in_the_answers_that_record_its_inputs(db_url, workspace,
                                                                                                          chat_sse, tmp_path):
    chat_sse.script(chat_reply([{"type": "text", "text": "one"}]), chat_reply([{"type": "text", "text": "two"}]))
    env = {"OPENAI_BASE_URL": chat_sse.url + "/v1", "CHRONICLE_THINKING_TOKENS": "2048"}
    script = write_script(tmp_path / "s.json", [response(text("fine"))])
    with serving(db_url, workspace, env_extra=env) as base:
        created = httpx.post(f"{base}/sessions", json={"prompt": "hi", "provider": "openai-compatible", "model": "llama3"})
        assert created.status_code == 201, created.text
        assert created.json()["notes"] == [THINKING]
        sid = created.json()["session_id"]
        assert sse(base, f"/sessions/{sid}/events")[-1][1]["status"] == "completed"
        queued = httpx.post(f"{base}/sessions/{sid}/inputs", json={"prompt": "again"})
        assert queued.status_code == 202 and queued.json()["notes"] == [THINKING]
        # A provider that takes the budget: nothing to say, and the field is there, empty.
        plain = httpx.post(f"{base}/sessions", json={"prompt": "hi", "provider": f"scripted:{script}"})
        assert plain.status_code == 201 and plain.json()["notes"] == []
    assert all("thinking" not in r.body for r in chat_sse.requests)


def test_a_tool_the_sessions_import_path_no_longer_holds_is_a_note_in_the_answer_to_its_next_input(db_url, workspace, tmp_path):
    """The server's worker would log it once; the client that posts the input is told, in the answer."""
    gone = tmp_path / "refund-gone"
    (workspace / "shop_http.py").write_text(
        "from pathlib import Path\n\nfrom chronicle import tool\n\n\n@tool(read_only=True)\ndef lookup(key: str) -> str:\n"
        "    \"\"\"Look up.\"\"\"\n    return key\n\n\n@tool(read_only=True)\ndef refund(key: str) -> str:\n"
        "    \"\"\"Refund.\"\"\"\n    return key\n\n\n"
        f"def __getattr__(name):  # TOOLS as the test decides, read again at each load\n"
        f"    if name == 'TOOLS':\n        return [lookup] if Path({str(gone)!r}).exists() else [lookup, refund]\n"
        "    raise AttributeError(name)\n", encoding="utf-8")
    (workspace / "chronicle.toml").write_text('[agents.main]\ntools = ["shop_http:TOOLS"]\n', encoding="utf-8")
    script = write_script(tmp_path / "s.json", [response(text("one")), response(text("two"))])
    with serving(db_url, workspace) as base:
        created = httpx.post(f"{base}/sessions", json={"prompt": "first", "provider": f"scripted:{script}"})
        assert created.status_code == 201 and created.json()["notes"] == [], created.text
        sid = created.json()["session_id"]
        assert sse(base, f"/sessions/{sid}/events")[-1][1]["status"] == "completed"
        gone.touch()
        queued = httpx.post(f"{base}/sessions/{sid}/inputs", json={"prompt": "second"})
        assert queued.status_code == 202, queued.text
        assert queued.json()["notes"] == [
            f"note: session {sid}: shop_http:TOOLS no longer holds 'refund', which it held when the session started; "
            "the session goes on without it (its history never called it)"]
        assert sse(base, f"/sessions/{sid}/events")[-1][1]["status"] == "completed"


def test_the_servers_own_ignored_settings_are_notes_on_healthz_for_a_caller_with_the_token(db_url, workspace):
    """A per-sender channel whose sessions run on a provider without a thinking budget, under CHRONICLE_THINKING_TOKENS.
    /healthz needs no token, so the notes (which name the channels) go only to a caller that sends it."""
    (workspace / "chronicle.toml").write_text(
        '[channels.signal]\nroute = "per_sender"\nprovider = "openai-compatible"\nmodel = "llama3"\n', encoding="utf-8")
    env = {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "CHRONICLE_THINKING_TOKENS": "2048"}
    with serving(db_url, workspace, token="s3cret", env_extra=env) as base:
        assert httpx.get(f"{base}/healthz").json() == {"status": "ok"}
        assert httpx.get(f"{base}/healthz", headers={"Authorization": "Bearer wrong"}).json() == {"status": "ok"}
        told = httpx.get(f"{base}/healthz", headers={"Authorization": "Bearer s3cret"})
        assert told.status_code == 200
        assert told.json()["notes"] == [f"note: channel signal: {THINKING.removeprefix('note: ')}"]
        assert set(told.json()) == {"status", "notes", "outbox", "worker", "streams"} and told.json()["outbox"]["running"] is False, told.json()


def test_a_server_without_ignored_settings_says_so_with_an_empty_list(db_url, workspace):
    with serving(db_url, workspace) as base:
        told = httpx.get(f"{base}/healthz").json()
        assert told["status"] == "ok" and told["notes"] == [] and set(told) == {"status", "notes", "outbox", "worker", "streams"}, told


def test_a_webhooks_answer_carries_the_notes_of_the_session_its_message_goes_to(db_url, workspace, chat_sse):
    """Recorded at once, or held in a burst for a sender whose session does not exist yet: the same note either way."""
    chat_sse.script(chat_reply([{"type": "text", "text": "hi"}]))
    (workspace / "chronicle.toml").write_text(
        '[channels.signal]\nroute = "per_sender"\nprovider = "openai-compatible"\nmodel = "llama3"\ncoalesce_s = 0\n'
        '[channels.burst]\nroute = "per_sender"\nprovider = "openai-compatible"\nmodel = "llama3"\ncoalesce_s = 60\n',
        encoding="utf-8")
    env = {"OPENAI_BASE_URL": chat_sse.url + "/v1", "CHRONICLE_THINKING_TOKENS": "2048"}
    with serving(db_url, workspace, env_extra=env) as base:
        now = httpx.post(f"{base}/hooks/signal", json={"text": "hello", "sender": "alice"})
        assert now.status_code == 202 and now.json()["recorded"] is True and now.json()["notes"] == [THINKING]
        held = httpx.post(f"{base}/hooks/burst", json={"text": "hello", "sender": "bob"})
        assert held.status_code == 202 and held.json()["recorded"] is False and held.json()["notes"] == [THINKING]
