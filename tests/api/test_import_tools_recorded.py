"""Every way a session starts records the names its tools' import paths hold then (`AgentSpec.import_tools`), so that
continuing it later says which tool the path no longer holds: a program's own spec given to the store's start path,
and chat's /new and /job, which start a session from a running one's spec. Both backends."""

from __future__ import annotations

import json
import sys
import warnings
from pathlib import Path
from uuid import UUID, uuid4

import pytest

from chronicle import Agent, Chronicle, ChronicleWarning
from tests.helpers import response, text

TOOLS = ("from chronicle import tool\n\n\n@tool(read_only=True)\ndef lookup(key: str) -> str:\n    \"\"\"Look up.\"\"\"\n"
         "    return key\n\n\n@tool(read_only=True)\ndef refund(key: str) -> str:\n    \"\"\"Refund.\"\"\"\n    return key\n\n\n"
         "TOOLS = [lookup, refund]\n")


def shop(workspace: Path) -> str:
    module = f"shop_{uuid4().hex[:8]}"  # its own module per test and backend: the first import is kept for the process
    (workspace / f"{module}.py").write_text(TOOLS, encoding="utf-8")
    return module


def scripted(tmp_path: Path, turns: int) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": [[response(text(f"answer {n}"))] for n in range(turns)]}}), encoding="utf-8")
    return f"scripted:{path}"


def ours(caught: list[warnings.WarningMessage]) -> list[str]:
    return [str(w.message) for w in caught if issubclass(w.category, ChronicleWarning)]


def test_a_session_a_program_starts_with_its_own_spec_is_told_which_tool_its_path_no_longer_holds(db_url, workspace, tmp_path):
    """The program builds the spec from its Agent and starts the session on the store itself (no `new_spec`); the
    session records the names, so a later run says the tool is gone instead of dropping it without a word."""
    from chronicle.runtime.sessions import start_session

    module = shop(workspace)
    provider = scripted(tmp_path, 2)
    agent = Agent(tools=[f"{module}:TOOLS"], provider=provider)
    with Chronicle(db_url) as app:
        spec = agent.definition(True).model_copy(update={"provider": provider, "model": "scripted", "workspace": str(workspace)})
        created, _ = start_session(app.store, spec, "first")
        sid = str(created.id)
        assert app.store.session(created.id).spec.import_tools == {f"{module}:TOOLS": ("lookup", "refund")}
        assert app.resume(sid).status == "completed"
        sys.modules[module].TOOLS.remove(sys.modules[module].refund)
        line = (f"note: session {sid}: {module}:TOOLS no longer holds 'refund', which it held when the session started; "
                "the session goes on without it (its history never called it)")
        with pytest.warns(ChronicleWarning) as caught:
            result = app.run_sync(agent, "second", session=sid)
        assert ours(caught) == [line] and result.notes == (line,) and result.status == "completed"


def test_chats_new_thread_and_job_record_the_names_the_path_holds_when_they_start_not_the_first_sessions(db_url, workspace,
                                                                                                        tmp_path):
    """/new and /job start a session with the running one's spec: they recorded its names as they were when that one
    started, so the new session, continued, claimed to have held a tool it never had."""
    from chronicle.runtime.app.jobs import submit_beside
    from chronicle.runtime.app.running import Conversation, RunOptions

    module = shop(workspace)
    provider = scripted(tmp_path, 3)
    agent = Agent(tools=[f"{module}:TOOLS"], provider=provider)
    with Chronicle(db_url) as app:
        first = app.run_sync(agent, "first", workspace=workspace).session_id
        sys.modules[module].TOOLS.remove(sys.modules[module].refund)  # the path holds lookup alone from now on
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ChronicleWarning)
            conversation = Conversation.open(app.store, first, RunOptions(registry=agent.registry(workspace)))
        thread = conversation.new_thread()
        assert app.store.session(thread).spec.import_tools == {f"{module}:TOOLS": ("lookup",)}
        job = submit_beside(app.store, first, "a job")
        assert app.store.session(UUID(job["job_id"])).spec.import_tools == {f"{module}:TOOLS": ("lookup",)}
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = app.run_sync(agent, "on the new thread", session=str(thread))
        assert ours(caught) == [] and result.notes == () and result.status == "completed"
