"""Configuration given in code that used to be accepted and then did nothing: refused with one line when the
session starts (nothing recorded), or said in a note (a ChronicleWarning and RunResult.notes) where refusing
would break a session already recorded. Both backends."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from typing import Any
from uuid import UUID

import pytest

from chronicle import Agent, Chronicle, ChronicleError, McpServer, tool
from chronicle.runtime.tools.mcp_hub import HUB
from tests.chat_sse_server import chat_sse  # noqa: F401 - a fixture
from tests.helpers import recorded_sessions, response, text, tool_use

SERVER = Path(__file__).resolve().parents[1] / "mcp_server.py"


@tool(requires_approval=True)
async def launch(target: str) -> str:
    """Launch something that needs a person's yes."""
    return f"launched {target}"


def scripted(tmp_path, *turns) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": list(turns)}}), encoding="utf-8")
    return f"scripted:{path}"


def test_a_misspelt_tool_in_agent_approvals_is_refused_naming_it_and_the_tools_there_are(db_url, workspace, tmp_path):
    agent = Agent(tools=[launch, "read_file"], approvals={"allow": ["lunch"]}, provider=scripted(tmp_path, response(text("hi"))))
    with Chronicle(db_url) as app:
        with pytest.raises(ChronicleError) as refused:
            app.run_sync(agent, "go", workspace=workspace)
        assert refused.value.code == 2
        assert str(refused.value) == ("Agent(main, approvals=...): allow names 'lunch', no tool of this session's agents "
                                      "(misspelt?); its tools are launch, read_file")
        assert recorded_sessions(app) == []


def test_a_sub_agent_policy_is_checked_and_a_shared_one_may_name_a_tool_only_another_agent_has(db_url, workspace, tmp_path):
    helper = Agent(name="helper", tools=["grep"], approvals={"require": ["grpe"]})
    with Chronicle(db_url) as app:
        with pytest.raises(ChronicleError, match=r"Agent\(helper, approvals=\.\.\.\): require names 'grpe'.*grep"):
            app.run_sync(Agent(tools=[launch], agents=[helper], provider=scripted(tmp_path, response(text("hi")))), "go",
                         workspace=workspace)
        (workspace / "chronicle.toml").write_text('[approvals]\nallow = ["launch"]\n', encoding="utf-8")
        fine = Agent(tools=[launch], agents=[Agent(name="helper", tools=["grep"])],
                     provider=scripted(tmp_path, response(tool_use("t1", "launch", target="moon")), response(text("done"))))
        result = app.run_sync(fine, "go", workspace=workspace)
        assert (result.status, result.text) == ("completed", "done")


def test_an_mcp_tool_is_known_by_the_name_its_server_listed_when_the_session_started(db_url, workspace, tmp_path):
    server = McpServer(name="t", command=sys.executable, args=[str(SERVER), "stdio"])
    try:
        with Chronicle(db_url) as app:
            typo = Agent(mcp_servers=[server], approvals={"allow": ["t__lookp"]}, tools=[],
                         provider=scripted(tmp_path, response(text("hi"))))
            with pytest.raises(ChronicleError, match=r"allow names 't__lookp'.*t__lookup"):
                app.run_sync(typo, "go", workspace=workspace)
            listed = Agent(mcp_servers=[server], approvals={"allow": ["t__lookup"]}, tools=[],
                           provider=scripted(tmp_path, response(tool_use("u1", "t__lookup", key="k")), response(text("done"))))
            result = app.run_sync(listed, "look", workspace=workspace)
            assert result.status == "completed"  # MCP tools ask for approval by default: the policy's allow said yes
            [decided] = [r for r in app.audit(session=result.session_id) if r["kind"] == "approval"]
            assert decided["detail"]["by"] == "policy"
    finally:
        HUB.close()


@tool(read_only=True)
async def peek(key: str) -> str:
    """Read a value."""
    return f"value of {key}"


def test_an_agent_whose_tools_a_continued_session_ignores_is_warned_of_as_the_cli_notes_an_ignored_flag(db_url, workspace, tmp_path):
    from chronicle import ChronicleWarning

    provider = scripted(tmp_path, [response(text("one"))], [response(text("two"))], [response(text("three"))], [response(text("four"))])
    first = Agent(tools=[peek, "read_file"], provider=provider)
    with Chronicle(db_url) as app:
        sid = app.run_sync(first, "first", workspace=workspace).session_id
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            same = app.run_sync(Agent(tools=[peek, "read_file"], provider=provider), "second", session=sid)
        assert same.notes == () and [w for w in caught if issubclass(w.category, ChronicleWarning)] == []
        other = Agent(tools=["read_file"], agents=[Agent(name="helper")], provider=provider)
        with pytest.warns(ChronicleWarning) as recorded:
            result = app.run_sync(other, "third", session=sid)
        # pytest.warns records every warning: a ResourceWarning for an event loop some earlier test left
        # behind can be collected inside the block, so only ours are compared.
        warned = ours(recorded)
        line = (f"note: the Agent's tools, sub-agents ignored; session {sid} keeps those recorded when it started "
                "(start a new session to use these)")
        assert [str(w.message) for w in warned] == [line]
        assert [w.filename for w in warned] == [__file__]  # the program's line, not pydantic's or asyncio's
        assert result.status == "completed" and result.notes == (line,)
        with pytest.warns(ChronicleWarning, match="tools, sub-agents ignored") as recorded:
            app.submit(other, "fourth", session=sid)
        assert [w.filename for w in ours(recorded)] == [__file__]
        spec = app.store.session(UUID(sid)).spec
        assert spec.tools == (peek.import_path, "read_file") and spec.registry == ()  # as recorded, unchanged


def no_passwords(text: str, where: str) -> None:
    """A guardrail: passes everything here (only its being recorded matters)."""


def test_an_agents_checks_policy_and_doom_loop_a_continued_session_ignores_are_warned_of_not_dropped(db_url, workspace,
                                                                                                    tmp_path):
    """A continued session keeps the guardrails, middleware, approval policy and doom-loop limit it recorded; an Agent
    with others was run without a word, as if they applied."""
    from chronicle import ChronicleWarning, Timeout

    provider = scripted(tmp_path, *[[response(text(f"answer {n}"))] for n in range(4)])
    first = Agent(tools=["read_file"], provider=provider, guardrails=[no_passwords], middleware=[Timeout(seconds=30)],
                  approvals={"policy": "ask", "require": ["read_file"]}, doom_loop=5)
    with Chronicle(db_url) as app:
        sid = app.run_sync(first, "first", workspace=workspace).session_id
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            same = app.run_sync(Agent(tools=["read_file"], provider=provider, guardrails=[no_passwords],
                                      middleware=[Timeout(seconds=30)], approvals={"policy": "ask", "require": ["read_file"]},
                                      doom_loop=5), "second", session=sid)
        assert same.notes == () and ours(caught) == []
        bare = Agent(tools=["read_file"], provider=provider)  # no policy and no doom_loop given: nothing said of them
        with pytest.warns(ChronicleWarning) as recorded:
            result = app.run_sync(bare, "third", session=sid)
        line = (f"note: the Agent's guardrails, middleware ignored; session {sid} keeps those recorded when it started "
                "(start a new session to use these)")
        assert [str(w.message) for w in ours(recorded)] == [line] and result.notes == (line,)
        stricter = Agent(tools=["read_file"], provider=provider, guardrails=[no_passwords], middleware=[Timeout(seconds=30)],
                         approvals={"policy": "deny"}, doom_loop=2)
        with pytest.warns(ChronicleWarning) as recorded:
            result = app.run_sync(stricter, "fourth", session=sid)
        line = (f"note: the Agent's approvals, doom_loop ignored; session {sid} keeps those recorded when it started "
                "(start a new session to use these)")
        assert [str(w.message) for w in ours(recorded)] == [line] and result.notes == (line,)


def test_an_agents_limits_prompt_switches_and_sub_agent_details_a_continued_session_ignores_are_warned_of(db_url, workspace,
                                                                                                          tmp_path):
    """A continued session keeps its recorded description, max_iterations, max_depth, system prompt, bootstrap files,
    auxiliary model and each sub-agent whole; an Agent giving others was run without a word. The run's own
    max_iterations applies to its run, and a session `run(max_iterations=)` started keeps that number without a note
    for the same Agent (whose default it never used)."""
    from chronicle import ChronicleWarning

    (workspace / "AGENTS.md").write_text("Be brief.\n", encoding="utf-8")
    provider = scripted(tmp_path, *[[response(text(f"answer {n}"))] for n in range(5)])

    def agent(**given: Any) -> Agent:
        helper = Agent(name="helper", tools=["grep"], description=given.pop("helper", "reads code"))
        return Agent(tools=["read_file"], provider=provider, agents=[helper], **given)

    first = agent(description="support desk", preamble=False, aux_model="claude-haiku-4-5")
    with Chronicle(db_url) as app:
        sid = app.run_sync(first, "first", workspace=workspace, max_iterations=5).session_id
        spec = app.store.session(UUID(sid)).spec
        assert spec.max_iterations == 5 and spec.project_files and spec.aux_model == "claude-haiku-4-5"
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            same = app.run_sync(agent(description="support desk", preamble=False, aux_model="claude-haiku-4-5"), "second",
                                session=sid)
        assert same.notes == () and ours(caught) == []
        other = agent(description="sales desk", max_iterations=9, max_depth=0, preamble=True, bootstrap=False,
                      aux_model="claude-sonnet-4-5", helper="writes code")
        with pytest.warns(ChronicleWarning) as recorded:
            result = app.run_sync(other, "third", session=sid)
        line = (f"note: the Agent's sub-agents, description, max_iterations, max_depth, preamble, bootstrap, aux_model ignored; "
                f"session {sid} keeps those recorded when it started (start a new session to use these)")
        assert [str(w.message) for w in ours(recorded)] == [line] and result.notes == (line,)
        with pytest.warns(ChronicleWarning) as recorded:  # the run's max_iterations is used: the Agent's is not said
            result = app.run_sync(other, "fourth", session=sid, max_iterations=9)
        assert [str(w.message) for w in ours(recorded)] == [line.replace(" max_iterations,", "")]
        with pytest.warns(ChronicleWarning, match="description, max_iterations, max_depth") as recorded:
            app.submit(other, "fifth", session=sid)
        assert app.store.session(UUID(sid)).spec == spec  # as recorded, unchanged


def test_a_workspace_given_with_a_session_to_submit_is_warned_of_not_dropped(db_url, workspace, tmp_path):
    """`submit --session --workspace` is refused (exit 2); the library's took the workspace and a worker ran the
    session where it recorded, without a word."""
    from chronicle import ChronicleWarning

    agent = Agent(tools=["read_file"], provider=scripted(tmp_path, [response(text("one"))]))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "first", workspace=workspace).session_id
        with pytest.warns(ChronicleWarning) as recorded:
            app.submit(agent, "again", session=sid, workspace=elsewhere)
        assert [str(w.message) for w in ours(recorded)] == [
            f"note: workspace ignored; session {sid} is run by a worker in the workspace it recorded "
            "(resume(session, workspace=...) runs it elsewhere)"]
        assert [w.filename for w in ours(recorded)] == [__file__]


def ours(recorded: Any) -> list[Any]:
    from chronicle import ChronicleWarning

    return [w for w in recorded if issubclass(w.category, ChronicleWarning)]


@pytest.mark.parametrize("given", [{"max_iterations": "10"}, {"max_iterations": True}, {"max_iterations": 2.5}, {"max_depth": "1"}])
def test_an_agent_limit_given_as_anything_but_a_whole_number_is_refused_naming_it(given):
    [(name, value)] = given.items()
    with pytest.raises(ValueError, match=f"^agent main: {name} takes a whole number, got {value!r}$".replace(".", r"\.")):
        Agent(**given)


def test_chronicle_thinking_tokens_for_an_openai_compatible_agent_is_warned_of_not_dropped(db_url, workspace, chat_sse, monkeypatch):
    from chronicle import ChronicleWarning
    from tests.chat_sse_server import chat_reply

    chat_sse.script(chat_reply([{"type": "text", "text": "one"}]), chat_reply([{"type": "text", "text": "two"}]))
    monkeypatch.setenv("OPENAI_BASE_URL", chat_sse.url + "/v1")
    monkeypatch.setenv("CHRONICLE_THINKING_TOKENS", "2048")
    line = ("note: CHRONICLE_THINKING_TOKENS=2048 ignored: provider openai-compatible takes no thinking budget "
            "(the server decides on reasoning); it applies to anthropic sessions only")
    agent = Agent(tools=["read_file"], provider="openai-compatible", model="llama3")
    with Chronicle(db_url) as app:
        with pytest.warns(ChronicleWarning) as warned:
            first = app.run_sync(agent, "hi", workspace=workspace)
        ours = [w for w in warned if issubclass(w.category, ChronicleWarning)]  # not a ResourceWarning the GC gave meanwhile
        assert [str(w.message) for w in ours] == [line] and [w.filename for w in ours] == [__file__]
        assert first.status == "completed" and first.notes == (line,)
        app.submit(agent, "again", session=first.session_id)
        with pytest.warns(ChronicleWarning, match="CHRONICLE_THINKING_TOKENS=2048 ignored"):
            resumed = app.resume(first.session_id)
        assert resumed.status == "completed" and resumed.notes == (line,)
    assert all("thinking" not in r.body for r in chat_sse.requests)

def test_a_tool_an_import_path_no_longer_holds_is_warned_of_when_never_called_and_refused_when_called(db_url, workspace, tmp_path):
    from uuid import uuid4

    from chronicle import ChronicleWarning

    module = f"shop_{uuid4().hex[:8]}"  # its own module per backend: the first import is kept for the process
    (workspace / f"{module}.py").write_text(
        "from chronicle import tool\n\n\n@tool(read_only=True)\ndef lookup(key: str) -> str:\n    \"\"\"Look up.\"\"\"\n"
        "    return key\n\n\n@tool(read_only=True)\ndef refund(key: str) -> str:\n    \"\"\"Refund.\"\"\"\n    return key\n\n\n"
        "TOOLS = [lookup, refund]\n", encoding="utf-8")
    agent = Agent(tools=[f"{module}:TOOLS"], provider=scripted(
        tmp_path, [response(tool_use("t1", "lookup", key="k")), response(text("one"))], [response(text("two"))],
        [response(text("three"))]))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "first", workspace=workspace).session_id
        assert app.store.session(UUID(sid)).spec.import_tools == {f"{module}:TOOLS": ("lookup", "refund")}
        sys.modules[module].TOOLS.remove(sys.modules[module].refund)  # the path now holds lookup alone
        line = (f"note: session {sid}: {module}:TOOLS no longer holds 'refund', which it held when the session started; "
                "the session goes on without it (its history never called it)")
        with pytest.warns(ChronicleWarning) as warned:
            result = app.run_sync(agent, "second", session=sid)
        assert [str(w.message) for w in ours(warned)] == [line] and result.notes == (line,) and result.status == "completed"
        sys.modules[module].TOOLS[:] = [sys.modules[module].refund]  # now the called one is gone
        with pytest.raises(ChronicleError, match=f"its history called 'lookup', which {module}:TOOLS no longer holds") as refused:
            app.run_sync(agent, "third", session=sid)
        assert refused.value.code == 2


def test_a_sub_agent_whose_import_path_holds_fewer_tools_than_recorded_is_warned_of_on_its_continued_parent(db_url, workspace,
                                                                                                              tmp_path):
    """A sub-agent the continued session starts from now on has no history to need the tool, so it goes without it:
    said, not refused."""
    from uuid import uuid4

    from chronicle import ChronicleWarning

    module = f"desk_{uuid4().hex[:8]}"
    (workspace / f"{module}.py").write_text(
        "from chronicle import tool\n\n\n@tool(read_only=True)\ndef lookup(key: str) -> str:\n    \"\"\"Look up.\"\"\"\n"
        "    return key\n\n\n@tool(read_only=True)\ndef refund(key: str) -> str:\n    \"\"\"Refund.\"\"\"\n    return key\n\n\n"
        "TOOLS = [lookup, refund]\n", encoding="utf-8")
    agent = Agent(tools=["read_file"], agents=[Agent(name="clerk", tools=[f"{module}:TOOLS"])],
                  provider=scripted(tmp_path, [response(text("one"))], [response(text("two"))]))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "first", workspace=workspace).session_id
        [clerk] = app.store.session(UUID(sid)).spec.registry
        assert clerk.import_tools == {f"{module}:TOOLS": ("lookup", "refund")}
        sys.modules[module].TOOLS.remove(sys.modules[module].refund)
        line = (f"note: session {sid}: {module}:TOOLS of sub-agent clerk no longer holds 'refund', which it held when the "
                "session started; the sub-agents it starts now go without it")
        with pytest.warns(ChronicleWarning) as caught:
            result = app.run_sync(agent, "second", session=sid)
        assert [str(w.message) for w in caught if issubclass(w.category, ChronicleWarning)] == [line]
        assert result.status == "completed" and result.notes == (line,)


def test_no_provider_and_no_key_is_refused_with_advice_a_program_can_follow(db_url, workspace, monkeypatch):
    # The library's words, not only the CLI's flag: a program gives the scripted provider on its Agent.
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with Chronicle(db_url) as app:
        for call in (app.run_sync, app.submit):
            with pytest.raises(ChronicleError) as refused:
                call(Agent(name="main"), "hello", workspace=workspace)
            assert refused.value.code == 2
            assert "ANTHROPIC_API_KEY" in str(refused.value) and 'Agent(provider="scripted:PATH")' in str(refused.value)
        assert recorded_sessions(app) == []  # on SQLite not even a store: both were refused before one was made


@pytest.mark.parametrize("provider, said", [
    ("openai", "agent main: provider: unknown provider 'openai': use anthropic, openai-compatible or scripted:PATH"),
    ("Anthropic", "unknown provider 'Anthropic'"),
    ("scripted:", "agent main: provider: the scripted provider needs a file"),
])
def test_a_provider_no_run_could_make_is_refused_where_the_agent_is_defined(provider, said):
    """`Agent(provider="openai")` was accepted, and only `run_sync` said "unknown provider" (after creating the
    store). As every other Agent field that cannot work, it is refused where the program writes it."""
    with pytest.raises(ChronicleError) as refused:
        Agent(provider=provider)
    assert refused.value.code == 2 and said in str(refused.value) and "\n" not in str(refused.value)
    assert isinstance(refused.value, ValueError)
    with pytest.raises(ChronicleError, match="unknown provider 'openai'"):
        Agent(name="main", agents=[Agent(name="helper", provider="openai")])


def test_a_provider_is_checked_by_its_name_alone_so_a_script_is_read_when_a_run_starts(tmp_path):
    later = tmp_path / "written-later.json"
    for fine in (f"scripted:{later}", "anthropic", "openai-compatible", None):
        assert Agent(provider=fine).provider == fine  # nothing read: the script need not exist yet
