"""MCP tools in the real loop against real MCP servers (tests/mcp_server.py, the SDK's server side),
over stdio and streamable HTTP on loopback, on SQLite and PostgreSQL."""

from __future__ import annotations

import asyncio
import base64
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from chronicle.runtime.agents.registry import RegistryError, find_registry
from chronicle.runtime.app.loops import build_loop
from chronicle.runtime.app.queries import log as log_entries
from chronicle.runtime.app.replay import replay
from chronicle.runtime.attachments import load_data
from chronicle.runtime.loop import LoopOptions
from chronicle.runtime.providers.scripted import ScriptedProvider
from chronicle.runtime.retry import RetryPolicy
from chronicle.runtime.sessions import start_session, submit_input
from chronicle.runtime.store import ChronicleStore
from chronicle.runtime.tools.mcp_hub import HUB
from tests import processes
from tests.helpers import response, text, tool_use
from tests.mcp_server import BLOB, PNG, TOKEN

SERVER = Path(__file__).resolve().parents[1] / "mcp_server.py"


@pytest.fixture(autouse=True)
def stop_servers():
    yield
    HUB.close()


def stdio_table(name: str = "t", **extra: str) -> str:
    lines = [
        f"[mcp.{name}]",
        f"command = {json.dumps(sys.executable)}",
        f'args = [{json.dumps(str(SERVER))}, "stdio"]',
        "trust_annotations = true",
    ]
    lines += [f"{k} = {v}" for k, v in extra.items()]
    return "\n".join(lines) + "\n"


class Recording(ScriptedProvider):
    sends_attachment_bytes = True  # as the Anthropic provider: stored images reach it as bytes

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.tool_names: list[list[str]] = []
        self.requests: list[Any] = []

    async def stream(self, request, on_delta):  # type: ignore[no-untyped-def]
        if request.auxiliary is None:
            self.tool_names.append([t["name"] for t in request.tools])
            self.requests.append(request)
        return await super().stream(request, on_delta)


def session_with(db_url: str, workspace: Path, tmp_path: Path, turns: list[list[dict[str, Any]]], prompt: str = "go"):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"agents": {"main": turns}}), encoding="utf-8")
    store = ChronicleStore(db_url)
    spec = find_registry(None, workspace).main_spec(f"scripted:{script}", "scripted", str(workspace))
    session, _ = start_session(store, spec, prompt)
    return store, session, script


def run_turn(store: ChronicleStore, session_id, workspace: Path, script: Path, **options: Any):
    loop = build_loop(
        store,
        store.session(session_id),
        workspace=workspace,
        options=LoopOptions(retry=RetryPolicy(base_s=0.001, cap_s=0.01), **options),
    )
    provider = Recording(script)
    loop.provider = provider
    return asyncio.run(loop.run_next(session_id)), provider


def calls_of(store: ChronicleStore, session_id) -> list[Any]:
    session = store.session(session_id)
    return [c for t in session.turns for c in store.tool_calls_of(store.turn(t))]


def test_stdio_tools_run_with_their_schemas_flags_and_rich_results_recorded(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(stdio_table(), encoding="utf-8")
    store, session, script = session_with(
        db_url,
        workspace,
        tmp_path,
        [
            [
                response(
                    tool_use("u1", "t__lookup", key="abc"), tool_use("u2", "t__picture"), tool_use("u3", "t__broken", reason="x")
                ),
                response(text("done")),
            ]
        ],
    )
    recorded = {e["name"]: e for e in store.session(session.id).spec.mcp_tools}
    assert set(recorded) == {
        "t__echo", "t__lookup", "t__picture", "t__broken", "t__crash", "t__slow", "t__leak", "t__big", "t__env_value",
        "t__header_value", "t__where",
    }
    assert recorded["t__lookup"]["input_schema"]["required"] == ["key"] and recorded["t__lookup"]["tool"] == "lookup"
    assert (
        recorded["t__lookup"]["flags"]["requires_approval"] is False and recorded["t__echo"]["flags"]["requires_approval"] is True
    )

    outcome, provider = run_turn(store, session.id, workspace, script, auto_approve=True)
    assert outcome.status == "completed"
    assert "t__lookup" in provider.tool_names[0] and "read_file" in provider.tool_names[0]
    lookup, picture, broken = calls_of(store, session.id)
    assert json.loads(lookup.output) == {"key": "abc", "value": 3, "found": True} and not lookup.is_error
    assert lookup.flags["read_only"] is True
    assert picture.output.startswith("[image: image/png") and picture.blocks[0]["type"] == "image"
    assert f", {len(PNG)} bytes]" in picture.output, "the size is the image's, base64 padding not counted"
    source = picture.blocks[0]["source"]
    assert source["type"] == "attachment" and source["media_type"] == "image/png", "the call records a reference"
    assert broken.is_error and "broken" in broken.output

    # The image reaches the model as an image block after the results, its bytes put back only in the request.
    png = base64.b64encode(PNG).decode()
    results = provider.requests[1].messages[-1]
    assert [b.type for b in results.content][:3] == ["tool_result"] * 3
    images = [b for b in results.content if b.type == "image"]
    assert len(images) == 1 and images[0].source == {"type": "base64", "media_type": "image/png", "data": png}
    assert any(b.type == "text" and "t__picture" in b.text for b in results.content)
    # Recorded once: in the attachments store, by content; the session's events hold only the reference.
    assert load_data(store, source["sha256"]) == png
    assert png not in json.dumps(log_entries(store, str(session.id)))


def test_a_tool_needs_approval_unless_the_server_marks_it_read_only_and_the_config_trusts_it(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(
        stdio_table().replace("trust_annotations = true", "trust_annotations = false"), encoding="utf-8"
    )
    store, session, script = session_with(
        db_url, workspace, tmp_path, [[response(tool_use("u1", "t__lookup", key="k")), response(text("ok"))]]
    )
    outcome, _ = run_turn(store, session.id, workspace, script)
    assert outcome.status == "awaiting_approval" and "t__lookup" in (outcome.reason or "")


def test_the_recorded_tool_list_holds_when_the_server_changes_and_a_server_gone_is_an_error_result(db_url, workspace, tmp_path):
    config = workspace / "chronicle.toml"
    config.write_text(stdio_table(), encoding="utf-8")
    store, session, script = session_with(
        db_url,
        workspace,
        tmp_path,
        [
            [response(tool_use("u1", "t__lookup", key="a")), response(text("one"))],
            [response(tool_use("u2", "t__lookup", key="b")), response(text("two"))],
            [response(tool_use("u3", "t__lookup", key="c")), response(text("three"))],
        ],
    )
    first, provider = run_turn(store, session.id, workspace, script)
    offered = provider.tool_names[0]

    # The server now lists one more tool: the session keeps offering what it recorded.
    config.write_text(stdio_table() + 'env = { MCP_TEST_EXTRA_TOOL = "1" }\n', encoding="utf-8")
    assert any(
        e["name"] == "t__extra" for e in find_registry(None, workspace).main_spec("scripted:x", "m", str(workspace)).mcp_tools
    )
    submit_input(store, session.id, "again")
    second, provider = run_turn(store, session.id, workspace, script)
    assert second.status == "completed" and provider.tool_names[0] == offered
    assert calls_of(store, session.id)[1].output.startswith("{")

    # The server cannot start any more: the call is an error result the model reads, not a crash.
    config.write_text(
        stdio_table().replace(json.dumps(sys.executable), json.dumps(str(tmp_path / "no-such-python"))), encoding="utf-8"
    )
    submit_input(store, session.id, "once more")
    third, _ = run_turn(store, session.id, workspace, script)
    assert third.status == "completed" and third.text == "three"
    gone = calls_of(store, session.id)[2]
    assert gone.status == "failed" and gone.is_error and "MCP server 't'" in gone.output


def test_a_server_that_crashes_mid_call_gives_an_error_result_and_the_next_call_starts_it_again(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(
        stdio_table() + "[mcp.t.tools.crash]\nrequires_approval = false\n[mcp.t.tools.echo]\nrequires_approval = false\n",
        encoding="utf-8",
    )
    store, session, script = session_with(
        db_url,
        workspace,
        tmp_path,
        [
            [
                response(tool_use("u1", "t__crash")),
                response(tool_use("u2", "t__echo", text="still here")),
                response(text("fine")),
            ]
        ],
    )
    outcome, _ = run_turn(store, session.id, workspace, script)
    assert outcome.status == "completed"
    crashed, echoed = calls_of(store, session.id)
    assert crashed.status == "failed" and "MCP server 't'" in crashed.output
    assert echoed.status == "completed" and echoed.output == "echo: still here"


def test_replay_answers_mcp_calls_from_the_recording_without_the_server(db_url, workspace, tmp_path):
    config = workspace / "chronicle.toml"
    config.write_text(stdio_table(), encoding="utf-8")
    store, session, script = session_with(
        db_url, workspace, tmp_path, [[response(tool_use("u1", "t__lookup", key="z")), response(text("ok"))]]
    )
    assert run_turn(store, session.id, workspace, script)[0].status == "completed"
    config.unlink()
    report = asyncio.run(replay(store, session.id))
    assert report.divergence is None and report.reused == 1


def test_a_config_naming_an_unknown_agent_or_both_transports_is_refused_in_one_line(workspace):
    (workspace / "chronicle.toml").write_text(stdio_table() + 'agents = ["ghost"]\n', encoding="utf-8")
    with pytest.raises(RegistryError, match="no agent named 'ghost'"):
        find_registry(None, workspace)
    (workspace / "chronicle.toml").write_text(stdio_table() + 'url = "http://127.0.0.1:1/mcp"\n', encoding="utf-8")
    with pytest.raises(RegistryError, match="either command"):
        find_registry(None, workspace)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server():
    port = free_port()
    process = processes.start(
        [sys.executable, str(SERVER), "http", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    process.terminate()
    process.wait(timeout=10)


def test_streamable_http_server_tools_run_and_header_secrets_stay_out_of_the_log(
    db_url, workspace, tmp_path, http_server, monkeypatch
):
    monkeypatch.setenv("MCP_TEST_TOKEN", "tok-secret-123456")
    (workspace / "chronicle.toml").write_text(
        f'[mcp.web]\nurl = "{http_server}"\nheaders = {{ Authorization = "Bearer ${{MCP_TEST_TOKEN}}" }}\n'
        "[mcp.web.tools.echo]\nrequires_approval = false\n",
        encoding="utf-8",
    )
    store, session, script = session_with(
        db_url, workspace, tmp_path, [[response(tool_use("u1", "web__echo", text="over http")), response(text("ok"))]]
    )
    outcome, _ = run_turn(store, session.id, workspace, script)
    assert outcome.status == "completed"
    assert calls_of(store, session.id)[0].output == "echo: over http"
    logged = json.dumps(
        [e.__dict__ for _, e in store.events_with_positions(store.aggregate_ids_of(store.session(session.id)))], default=str
    )
    assert "web__echo" in logged and "tok-secret-123456" not in logged


def test_a_secret_anywhere_in_a_rich_result_is_cut_before_it_is_recorded(db_url, workspace, tmp_path):
    """Text blocks were scanned, the rest recorded as the server sent it: its structured content, an embedded
    resource's text and a link's uri and name kept a token that `output` beside them had cut."""
    (workspace / "chronicle.toml").write_text(stdio_table(), encoding="utf-8")
    store, session, script = session_with(
        db_url, workspace, tmp_path, [[response(tool_use("u1", "t__leak")), response(text("done"))]]
    )
    outcome, _ = run_turn(store, session.id, workspace, script)
    assert outcome.status == "completed"
    (call,) = calls_of(store, session.id)
    assert TOKEN not in call.output and "[REDACTED:github-token]" in call.output
    kinds = [b["type"] for b in call.blocks]
    assert kinds == ["text", "resource", "resource_link", "resource", "structured"], kinds
    assert call.blocks[1]["resource"]["text"] == "key [REDACTED:github-token]"
    assert call.blocks[2] == {"type": "resource_link", "uri": "https://example.com/?token=[REDACTED:github-token]",
                              "name": "key [REDACTED:github-token]"}
    assert call.blocks[3]["resource"]["blob"] == BLOB, "bytes are not text: a binary resource is kept as given"
    assert call.blocks[4]["content"]["result"][0] == "key [REDACTED:github-token]"
    logged = log_entries(store, str(session.id))
    assert TOKEN not in json.dumps(logged)
    (noted,) = [e["data"] for e in logged if e["event"] == "SecretsRedacted" and e["aggregate"] == "tool_call"]
    # Counted where it was cut: 3 in the text the model reads (text, resource, link), 4 in the blocks, and 4 in the
    # server's structured copy of its result (whose copy of the blob is no binary field: the scan's to judge).
    assert noted["where"] == "output" and noted["counts"]["github-token"] == 11, noted


def test_what_a_server_is_given_in_its_headers_is_cut_from_what_it_sends_back(db_url, workspace, tmp_path, http_server, monkeypatch):
    """A header's value reached the store when the server said it back: only the process's own secret-named variables
    were cut, and neither a variable named otherwise (`${MCP_TEST_HTTP_BEARER}`) nor a value written in the file was."""
    monkeypatch.setenv("MCP_TEST_HTTP_BEARER", "tok-header-778899")
    (workspace / "chronicle.toml").write_text(
        f'[mcp.web]\nurl = "{http_server}"\ntrust_annotations = true\n'
        'headers = { Authorization = "Bearer ${MCP_TEST_HTTP_BEARER}", X-Api-Key = "key-in-the-file-5566", Accept-Language = "fr-CH" }\n',
        encoding="utf-8",
    )
    asked = [tool_use(f"u{i}", "web__header_value", header=h) for i, h in enumerate(("authorization", "x-api-key", "accept-language"))]
    store, session, script = session_with(db_url, workspace, tmp_path, [[response(*asked), response(text("ok"))]])
    outcome, _ = run_turn(store, session.id, workspace, script)
    assert outcome.status == "completed"
    outputs = [c.output for c in calls_of(store, session.id)]
    assert outputs == ["authorization is [REDACTED:environment]", "x-api-key is [REDACTED:environment]",
                       "accept-language is fr-CH"], outputs
    logged = json.dumps(log_entries(store, str(session.id)))
    assert "tok-header-778899" not in logged and "key-in-the-file-5566" not in logged


def test_a_huge_result_is_recorded_to_its_first_30000_characters_blocks_included(db_url, workspace, tmp_path):
    """`output` was cut to 30,000 characters and the blocks beside it kept the whole text twice (a text block and the
    SDK's structured copy): a 3 MB result made a 2.3 MB event. The blocks are cut as the text is, with its note."""
    (workspace / "chronicle.toml").write_text(stdio_table(), encoding="utf-8")
    store, session, script = session_with(
        db_url, workspace, tmp_path, [[response(tool_use("u1", "t__big", size=200_000), tool_use("u2", "t__big", size=100)),
                                       response(text("done"))]]
    )
    outcome, _ = run_turn(store, session.id, workspace, script)
    assert outcome.status == "completed"
    huge, small = calls_of(store, session.id)
    digits = "0123456789" * 20_000
    assert huge.output == digits[:30_000] + "\n[truncated: 170000 more characters not shown]"
    whole = json.dumps({"result": digits}, ensure_ascii=False)
    assert huge.blocks == [{"type": "text", "text": huge.output},
                           {"type": "structured", "json": whole[:30_000] + f"\n[truncated: {len(whole) - 30_000} more characters not shown]"}]
    assert small.blocks == [{"type": "text", "text": digits[:100]}, {"type": "structured", "content": {"result": digits[:100]}}]
    [ended] = [e for e in log_entries(store, str(session.id)) if e["event"] == "Completed" and e["data"].get("name") == "t__big"
               and e["data"]["tool_use_id"] == "u1"]
    assert len(json.dumps(ended)) < 100_000, len(json.dumps(ended))  # the output, its text block, the structured copy
