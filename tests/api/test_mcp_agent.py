"""Agent(mcp_servers=[...]): MCP servers given in code or by their chronicle.toml name."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from uuid import UUID

import pytest

from chronicle import Agent, Chronicle, ChronicleError, McpServer
from chronicle.runtime.tools.mcp_hub import HUB
from tests.helpers import response, text, tool_use
from tests.store_dump import dump_store, holds

SERVER = Path(__file__).resolve().parents[1] / "mcp_server.py"


@pytest.fixture(autouse=True)
def stop_servers():
    yield
    HUB.close()


def script(path: Path, *responses: dict) -> str:
    path.write_text(json.dumps({"agents": {"main": list(responses)}}), encoding="utf-8")
    return f"scripted:{path}"


def test_a_server_defined_in_code_gives_its_tools_to_the_agent_and_is_recorded_by_name_only(db_url, workspace, tmp_path, monkeypatch):
    monkeypatch.setenv("MCP_SECRET_TOKEN", "s3cret-value-123")
    server = McpServer(name="t", command=sys.executable, args=[str(SERVER), "stdio"], trust_annotations=True,
                       env={"TOKEN": "${MCP_SECRET_TOKEN}"})
    provider = script(tmp_path / "s.json", response(tool_use("u1", "t__lookup", key="code")), response(text("done")))
    app = Chronicle(db_url)
    result = app.run_sync(Agent(provider=provider, mcp_servers=[server]), "look it up", workspace=str(workspace))
    assert result.status == "completed"
    session = app.store.session(UUID(result.session_id))
    recorded = {e["name"]: e for e in session.spec.mcp_tools}
    assert recorded["t__lookup"]["config"] == "code:t"
    assert "s3cret-value-123" not in json.dumps(session.spec.model_dump(mode="json"))
    call = app.store.tool_calls_of(app.store.turn(session.turns[0]))[0]
    assert json.loads(call.output)["key"] == "code"


def test_a_name_refers_to_the_workspace_config_and_an_unknown_one_is_refused(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(
        f"[mcp.files]\ncommand = {json.dumps(sys.executable)}\nargs = [{json.dumps(str(SERVER))}, \"stdio\"]\n", encoding="utf-8")
    provider = script(tmp_path / "s.json", response(text("hi")))
    app = Chronicle(db_url)
    result = app.run_sync(Agent(provider=provider, mcp_servers=["files"]), "hi", workspace=str(workspace))
    names = {e["name"] for e in app.store.session(UUID(result.session_id)).spec.mcp_tools}
    assert "files__echo" in names
    with pytest.raises(ValueError, match=r"no \[mcp.nope\]"):
        app.run_sync(Agent(provider=provider, mcp_servers=["nope"]), "hi", workspace=str(workspace))
    broken = McpServer(name="down", command=str(tmp_path / "missing-binary"))
    with pytest.raises(ChronicleError, match="MCP server 'down'"):
        app.run_sync(Agent(provider=provider, mcp_servers=[broken]), "hi", workspace=str(workspace))


def test_two_agents_with_a_server_of_one_name_each_reach_their_own(sqlite_url, workspace, tmp_path):
    """A server defined in code is recorded by name only, and the newest definition of a name was the one every
    session reached: a program making one agent per tenant, each with `McpServer(name="kb", env={token})`, resumed
    the first tenant's approved call on the second tenant's server. A run uses the server its own Agent was given."""
    def tenant(name: str, *answers: dict) -> Agent:  # type: ignore[type-arg]
        env = {"MCP_TEST_EXTRA_TOOL": "1"} if name == "acme" else {}  # only acme's server has `extra`
        server = McpServer(name="kb", command=sys.executable, args=[str(SERVER), "stdio"], trust_annotations=True, env=env)
        return Agent(provider=script(tmp_path / f"{name}.json", *answers), mcp_servers=[server])

    acme = tenant("acme", response(tool_use("u1", "kb__extra")), response(text("done")))
    globex = tenant("globex", response(tool_use("u1", "kb__lookup", key="g")), response(text("done")))  # defined last
    with Chronicle(sqlite_url) as app:
        paused = app.run_sync(acme, "use the extra tool", workspace=str(workspace))
        assert paused.status == "awaiting_approval"
        assert app.run_sync(globex, "look it up", workspace=str(workspace)).status == "completed"
        app.approve(paused.session_id)
        resumed = app.resume(paused.session_id)  # acme's call, on acme's server: globex's has no `extra`
        assert resumed.status == "completed", resumed
        log = app.log(paused.session_id)
        [ended] = [e for e in log if e["aggregate"] == "tool_call" and e["event"] in ("Completed", "Failed")]
        assert (ended["event"], ended["data"].get("output")) == ("Completed", "extra")
    with pytest.raises(ChronicleError, match="two different"):
        Agent(provider=acme.provider, mcp_servers=[acme.mcp_servers[0]],
              agents=[Agent(name="helper", mcp_servers=[globex.mcp_servers[0]])])


def test_what_a_server_defined_in_code_is_given_is_cut_from_everything_recorded(db_url, workspace, tmp_path):
    """The values an McpServer's env hands the server are the process's secrets from its definition on: cut from the
    result that prints one, and from the model's answer that repeats it, though no variable of the process holds it."""
    server = McpServer(name="t", command=sys.executable, args=[str(SERVER), "stdio"], trust_annotations=True,
                       env={"SERVICE_PASSWORD": "code-pass-778899"})
    provider = script(tmp_path / "s.json", response(tool_use("u1", "t__env_value", variable="SERVICE_PASSWORD")),
                      response(text("the password is code-pass-778899")))
    with Chronicle(db_url) as app:
        result = app.run_sync(Agent(provider=provider, mcp_servers=[server]), "what is it", workspace=str(workspace))
        assert result.status == "completed" and result.text == "the password is [REDACTED:environment]", result
        [ended] = [e for e in app.log(result.session_id) if e["aggregate"] == "tool_call" and e["event"] == "Completed"]
        assert ended["data"]["output"] == "SERVICE_PASSWORD is [REDACTED:environment]"
    assert not holds(dump_store(db_url), "code-pass-778899")


def test_a_stdio_server_runs_in_the_sessions_workspace_and_a_relative_cwd_is_taken_from_it(db_url, tmp_path):
    """`args = ["--root", "."]` means the workspace: a server started from a process whose cwd is elsewhere (serve,
    worker, a script) runs where the session's tools act, and one process serving two workspaces starts it in each."""
    first, second = tmp_path / "first", tmp_path / "second"
    (second / "tools").mkdir(parents=True)
    first.mkdir()
    server = McpServer(name="t", command=sys.executable, args=[str(SERVER), "stdio"], trust_annotations=True)
    app = Chronicle(db_url)

    def where(workspace: Path, given: McpServer) -> str:
        provider = script(tmp_path / f"{workspace.name}-{given.cwd}.json", response(tool_use("u1", "t__where")), response(text("ok")))
        result = app.run_sync(Agent(provider=provider, mcp_servers=[given]), "where", workspace=str(workspace))
        return app.store.tool_calls_of(app.store.turn(app.store.session(UUID(result.session_id)).turns[0]))[0].output

    assert where(first, server) == str(first.resolve())
    assert where(second, server) == str(second.resolve()), "a server running for another workspace was reused"
    assert where(second, McpServer(**{**server.model_dump(), "cwd": "tools"})) == str((second / "tools").resolve())
