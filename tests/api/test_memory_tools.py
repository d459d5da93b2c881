"""Seeds 000/003's memory tools: memory_search and memory_get read MEMORY.md and memory/ (where `compact --strategy
workspace` moves older turns), nothing else of the workspace; an agent has them when its tools name them. Both
backends, through the CLI and the scripted provider, and from code."""

from __future__ import annotations

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from tests.api.test_shared_notes import tool_results, use
from tests.helpers import cli, json_lines, response, text, write_script

REGISTRY = '[agents.main]\ntools = ["memory_search", "memory_get"]\n'


def memory(workspace) -> None:
    (workspace / "MEMORY.md").write_text("# Team\nThe deploy key lives in the vault.\n", encoding="utf-8")
    (workspace / "memory").mkdir()
    (workspace / "memory" / "2026-11-27.md").write_text("## turn 1\nWe chose the vault over env files.\n", encoding="utf-8")
    (workspace / "memory" / "2026-11-28.md").write_text("## turn 4\nDeploy moved to Fridays.\nThe vault was rotated.\n",
                                                        encoding="utf-8")
    (workspace / "src.py").write_text("SECRET_PLAN = 'not memory'\n", encoding="utf-8")


def test_search_and_get_read_memory_and_nothing_else_of_the_workspace(db_url, workspace, tmp_path):
    memory(workspace)
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    script = write_script(tmp_path / "s.json", [
        response(use("s", "memory_search", query="VAULT"), use("d", "memory_search", query="deploy vault"),
                 use("n", "memory_search", query="kubernetes"), use("p", "memory_search", query="SECRET_PLAN")),
        response(use("g", "memory_get", path="memory/2026-11-28.md", from_line=2, lines=1), use("m", "memory_get", path="./MEMORY.md"),
                 use("o", "memory_get", path="src.py"), use("u", "memory_get", path="memory/../src.py"),
                 use("e", "memory_get", path="memory/2026-11-28.md", from_line=9)),
        response(text("the vault")),
    ])
    done = cli("run", "where is the key?", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json",
               db=db_url)
    assert done.returncode == 0, done.stderr
    results = tool_results(db_url, json_lines(done.stdout)[0]["session_id"])
    # newest daily log first, then the older one; MEMORY.md leads
    assert results["s"]["content"].splitlines() == [
        "MEMORY.md:2: The deploy key lives in the vault.", "memory/2026-11-28.md:3: The vault was rotated.",
        "memory/2026-11-27.md:2: We chose the vault over env files."]
    assert results["d"]["content"] == "MEMORY.md:2: The deploy key lives in the vault."  # every word on the line
    assert results["n"]["content"].startswith("no line of 3 memory file(s) holds all of: kubernetes")
    assert "no line" in results["p"]["content"]  # src.py is the workspace's, not memory
    assert results["g"]["content"] == "2: Deploy moved to Fridays." and results["m"]["content"].startswith("1: # Team")
    for refused in ("o", "u"):
        assert results[refused].get("is_error") and "is not memory" in results[refused]["content"], results[refused]
    assert results["e"].get("is_error") and "has 3 line(s)" in results["e"]["content"]


def test_an_agent_in_code_names_them_and_a_misspelt_one_is_refused_naming_them(db_url, workspace, tmp_path):
    memory(workspace)
    script = write_script(tmp_path / "s.json", [response(use("s", "memory_search", query="Fridays")), response(text("Fridays"))])
    with Chronicle(db_url) as app:
        done = app.run_sync(Agent(tools=["memory_search"], provider=f"scripted:{script}"), "when?", workspace=workspace)
        assert done.status == "completed" and done.text == "Fridays"
        with pytest.raises(ChronicleError) as refused:
            Agent(tools=["memory_serch"])
    assert "the memory tools' memory_search, memory_get" in str(refused.value)
    assert tool_results(db_url, done.session_id)["s"]["content"] == "memory/2026-11-28.md:2: Deploy moved to Fridays."


def test_no_memory_yet_is_said_not_an_error(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    script = write_script(tmp_path / "s.json", [response(use("s", "memory_search", query="anything")), response(text("none"))])
    done = cli("run", "anything?", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    result = tool_results(db_url, json_lines(done.stdout)[0]["session_id"])["s"]
    assert not result.get("is_error") and result["content"].startswith("no memory yet")
