"""AGENTS.md / TOOLS.md and the [agent] switches through the real CLI: what a session and its sub-agents record,
replay after the file changed, the off switches, and the refusals that record nothing (both backends)."""

from __future__ import annotations

from chronicle.runtime.agents.registry import COMPLETION_PROTOCOL
from tests.helpers import cli, json_lines, response, text, tool_use, write_script

REGISTRY = """
[agents.researcher]
description = "Reads files and reports"
"""


def started_specs(db_url: str, sid: str, tree: bool = False) -> dict[str, dict]:
    """Each session's recorded spec, by agent name, as `log --json` shows it."""
    rows = json_lines(cli("log", sid, "--json", *(["--tree"] if tree else []), db=db_url).stdout)
    return {r["data"]["spec"]["name"]: r["data"]["spec"] for r in rows if r["event"] == "Started" and r["data"].get("spec")}


def test_a_sub_agent_gets_agents_md_and_tools_md_but_no_memory_and_no_default_preamble(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    (workspace / "AGENTS.md").write_text("Cite file names.\n", encoding="utf-8")
    (workspace / "TOOLS.md").write_text("grep is fast.\n", encoding="utf-8")
    (workspace / "MEMORY.md").write_text("The user is called Ada.\n", encoding="utf-8")
    script = write_script(
        tmp_path / "s.json",
        [response(tool_use("d", "delegate", tasks=[{"agent": "researcher", "task": "read hello.txt"}])), response(text("Done."))],
        researcher=[response(tool_use("c", "task_complete", status="completed", summary="it says hello"))],
    )
    run = cli("run", "look", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    specs = started_specs(db_url, json_lines(run.stdout)[0]["session_id"], tree=True)
    main, child = specs["main"], specs["researcher"]
    assert [f["name"] for f in main["project_files"]] == ["AGENTS.md", "TOOLS.md"] and main["memory"] == "The user is called Ada."
    assert child["project_files"] == main["project_files"]
    # its preamble is seed 004's identity and completion protocol: not the top level's default prompt (workspace, date, tools)
    identity = "<identity>\nYou are researcher-read-hello-1, a researcher sub-agent: Reads files and reports\n</identity>"
    assert child["memory"] == "" and child["preamble"] == f"{identity}\n\n{COMPLETION_PROTOCOL}"


def test_replay_stays_identical_and_a_continued_session_keeps_the_text_after_agents_md_changes(db_url, workspace, tmp_path):
    (workspace / "AGENTS.md").write_text("Answer in English.\n", encoding="utf-8")
    script = write_script(tmp_path / "s.json", [[response(text("Hello."))], [response(text("Again."))]])
    run = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    sid = json_lines(run.stdout)[0]["session_id"]
    (workspace / "AGENTS.md").write_text("Answer in French, always.\n", encoding="utf-8")
    assert cli("run", "again", "--session", sid, "--json", db=db_url).returncode == 0
    replay = cli("replay", sid, "--json", db=db_url)
    assert replay.returncode == 0 and json_lines(replay.stdout)[0]["identical"] is True, replay.stdout + replay.stderr
    [agents_md] = started_specs(db_url, sid)["main"]["project_files"]
    assert agents_md["text"] == "Answer in English."


def test_agent_preamble_and_bootstrap_false_start_a_session_with_the_instructions_alone(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(
        '[agent]\npreamble = false\nbootstrap = false\n\n[agents.main]\ninstructions = "Be terse."\n', encoding="utf-8")
    (workspace / "AGENTS.md").write_text("Cite file names.\n", encoding="utf-8")
    (workspace / "MEMORY.md").write_text("The user is called Ada.\n", encoding="utf-8")
    script = write_script(tmp_path / "s.json", [response(text("Ok."))])
    run = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    spec = started_specs(db_url, json_lines(run.stdout)[0]["session_id"])["main"]
    assert (spec["preamble"], spec["memory"], spec["instructions"]) == ("", "", "Be terse.")
    assert "project_files" not in spec


def test_a_bad_switch_or_a_huge_agents_md_is_one_line_exit_2_and_records_nothing(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("Ok."))])
    args = ("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace))
    (workspace / "chronicle.toml").write_text('[agent]\npreamble = "no"\n', encoding="utf-8")
    bad = cli(*args, db=sqlite_url)
    assert bad.returncode == 2 and "[agent] preamble: expected true or false, got 'no'" in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    (workspace / "chronicle.toml").write_text('[agent]\nprompt = false\n', encoding="utf-8")
    unknown = cli(*args, db=sqlite_url)
    assert unknown.returncode == 2 and "[agent] prompt: unknown key; allowed: behavioral_hints, bootstrap, preamble" in unknown.stderr, unknown.stderr
    (workspace / "chronicle.toml").unlink()
    (workspace / "AGENTS.md").write_text("x" * 40_000, encoding="utf-8")
    huge = cli(*args, db=sqlite_url)
    assert huge.returncode == 2 and "AGENTS.md: 40000 characters; keep it under 32000" in huge.stderr, huge.stderr
    assert "bootstrap = false" in huge.stderr and len(huge.stderr.strip().splitlines()) == 1
    assert json_lines(cli("sessions", "--json", db=sqlite_url).stdout) == []
