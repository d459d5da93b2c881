"""Skills through the real CLI: discovery and its order, inline text in the system prompt, load_skill
answering from what was recorded, and replay staying exact after SKILL.md changes on disk."""

from __future__ import annotations

from tests.helpers import cli, json_lines, response, text, write_script

INLINE = """---
name: house-style
description: How we write
mode: inline
version: 3
---
Always answer in one sentence.
"""

ON_DEMAND = """---
name: release-notes
description: >
  Write release notes
  from the git log
when_to_use: the user asks for a changelog
---
1. Read CHANGES.
2. Group by kind.
"""


def add_skill(root, folder: str, body: str, *extra: str) -> None:
    path = root / folder
    path.mkdir(parents=True, exist_ok=True)
    (path / "SKILL.md").write_text(body, encoding="utf-8")
    for name in extra:
        (path / name).write_text("x", encoding="utf-8")


def test_skills_lists_workspace_skills_then_configured_dirs_with_the_first_of_a_name_winning(workspace, tmp_path):
    add_skill(workspace / "skills", "b-notes", ON_DEMAND, "template.md")
    add_skill(workspace / "skills", "a-style", INLINE)
    shared = tmp_path / "shared"
    add_skill(shared, "other", "---\nname: house-style\ndescription: shadowed\n---\nnever seen\n")
    add_skill(shared, "plain", "No front matter at all.\n")
    (workspace / "chronicle.toml").write_text(f'[skills]\ndirs = ["{shared}"]\n', encoding="utf-8")

    listed = cli("skills", "--workspace", str(workspace), "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json_lines(listed.stdout)
    assert [(r["name"], r["mode"]) for r in rows] == [("house-style", "inline"), ("release-notes", "on_demand"), ("plain", "on_demand")]
    assert rows[1]["description"] == "Write release notes from the git log"
    assert rows[1]["path"] == "skills/b-notes/SKILL.md" and rows[1]["files"] == ["template.md"]
    assert rows[2]["path"] == str(shared / "plain" / "SKILL.md")
    assert all(len(r["sha256"]) == 64 for r in rows)
    human = cli("skills", "--workspace", str(workspace))
    assert "release-notes" in human.stdout and "on_demand" in human.stdout


def test_a_broken_skill_is_one_line_naming_the_file_and_exit_2(workspace):
    add_skill(workspace / "skills", "bad", "---\nname: bad\nmode: sometimes\n---\nbody\n")
    result = cli("skills", "--workspace", str(workspace))
    assert result.returncode == 2
    assert "skills/bad/SKILL.md: mode must be inline or on_demand" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_model_loads_a_skill_as_recorded_and_replay_stays_exact_after_the_file_changes(db_url, workspace, tmp_path):
    add_skill(workspace / "skills", "style", INLINE)
    add_skill(workspace / "skills", "notes", ON_DEMAND, "template.md")
    script = write_script(tmp_path / "s.json", [
        response({"type": "tool_use", "id": "t1", "name": "load_skill", "input": {"name": "release-notes"}}),
        response(text("Done, following the procedure.")),
    ])
    run = cli("run", "write the notes", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    events = json_lines(run.stdout)
    sid = events[0]["session_id"]
    loaded = next(e for e in events if e["type"] == "tool_end" and e["name"] == "load_skill")
    assert loaded["is_error"] is False
    assert "1. Read CHANGES." in loaded["output"] and "- skills/notes/template.md" in loaded["output"]

    audit = json_lines(cli("audit", "--session", sid, "--json", db=db_url).stdout)
    start = next(e for e in audit if e["kind"] == "session_start")
    recorded = {s["name"]: s for s in start["detail"]["skills"]}
    assert recorded["house-style"]["mode"] == "inline" and recorded["house-style"]["version"] == "3"
    assert f'sha256="{recorded["release-notes"]["sha256"]}"' in loaded["output"]

    # The files change after the session: the recorded text is what counts, for replay and for load_skill.
    add_skill(workspace / "skills", "style", INLINE.replace("one sentence", "two sentences"))
    add_skill(workspace / "skills", "notes", ON_DEMAND.replace("Group by kind", "Sort by date"))
    replay = cli("replay", sid, "--json", db=db_url)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert json_lines(replay.stdout)[0]["identical"] is True


def test_an_unknown_skill_name_is_an_error_result_the_model_reads(sqlite_url, workspace, tmp_path):
    add_skill(workspace / "skills", "notes", ON_DEMAND)
    load = {"type": "tool_use", "id": "t1", "name": "load_skill", "input": {"name": "nope"}}
    script = write_script(tmp_path / "s.json", [response(load), response(text("ok"))])
    run = cli("run", "go", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    assert run.returncode == 0, run.stderr
    end = next(e for e in json_lines(run.stdout) if e["type"] == "tool_end")
    assert end["is_error"] is True and "no skill named 'nope'; skills: release-notes" in end["output"]
