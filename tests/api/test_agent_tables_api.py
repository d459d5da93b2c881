"""`Agent(compaction=..., effects=..., skills=...)`: chronicle.toml's [compaction], [effects] and [skills] set in code,
checked as strictly as the tables, recorded on the session (so `resume` and workers go by them), and winning over the
workspace's file key by key, on both backends."""

from __future__ import annotations

import json

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from tests.helpers import recorded_sessions, response, text


def scripted(tmp_path, turns):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": turns}}), encoding="utf-8")
    return f"scripted:{path}"


def spec_of(app: Chronicle, sid: str) -> dict:
    [started] = [e for e in app.log(sid) if e["event"] == "Started" and e["aggregate"] == "session"]
    return started["data"]["spec"]


def answers(n):
    return [[response(text(f"a fairly long answer number {i}"))] for i in range(1, n + 1)]


def test_compaction_given_in_code_wins_over_the_file_and_a_worker_applies_it(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text("[compaction]\nauto = false\nkeep_recent = 1\n", encoding="utf-8")
    agent = Agent(tools=[], provider=scripted(tmp_path, answers(3)), compaction={"auto": True, "context_window": 40})
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "first question with some words", workspace=workspace).session_id
        assert spec_of(app, sid)["compaction"] == {"auto": True, "context_window": 40}
        app.run_sync(agent, "second question", session=sid)
        app.submit(agent, "third question", session=sid)  # run by a worker: it reads the record, not this Agent
        assert [r.status for r in app.work(once=True, poll=0.05, log=lambda line: None)] == ["completed"]
        texts = [b.get("text", "") for m in app.history(sid) for b in m["content"]]
        assert "first question with some words" not in texts  # compacted away, though the file says auto = false
        assert texts[-1] == "a fairly long answer number 3"


def test_the_file_still_gives_what_code_leaves_out_and_code_can_turn_compaction_off(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text("[compaction]\ncontext_window = 40\nkeep_recent = 1\n", encoding="utf-8")
    agent = Agent(tools=[], provider=scripted(tmp_path, answers(3)), compaction={"auto": False})
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "first question with some words", workspace=workspace).session_id
        for prompt in ("second question", "third question"):
            assert app.run_sync(agent, prompt, session=sid).status == "completed"
        assert spec_of(app, sid)["compaction"] == {"auto": False}
        texts = [b.get("text", "") for m in app.history(sid) for b in m["content"]]
        assert texts[0] == "first question with some words" and len(texts) == 6


def test_effects_given_in_code_are_recorded_key_by_key_over_the_files(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text("[effects]\ntrim_tool_results_after_turns = 4\ntrim_tool_results_to_chars = 100\n",
                                              encoding="utf-8")
    agent = Agent(tools=[], provider=scripted(tmp_path, answers(1)), effects={"trim_tool_results_to_chars": 7})
    with Chronicle(db_url) as app:
        spec = spec_of(app, app.run_sync(agent, "hi", workspace=workspace).session_id)
        assert (spec["trim_tool_results_after_turns"], spec["trim_tool_results_to_chars"]) == (4, 7)
        assert "compaction" not in spec  # none given: the record looks as it did before


def test_skill_dirs_given_in_code_replace_the_files(db_url, workspace, tmp_path):
    for folder, name in (("file-skills", "from-file"), ("code-skills", "from-code")):
        (tmp_path / folder / name).mkdir(parents=True)
        (tmp_path / folder / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: A skill\n---\nSteps.\n",
                                                             encoding="utf-8")
    (workspace / "chronicle.toml").write_text(f'[skills]\ndirs = ["{tmp_path / "file-skills"}"]\n', encoding="utf-8")
    provider = scripted(tmp_path, answers(2))
    with Chronicle(db_url) as app:
        by_file = spec_of(app, app.run_sync(Agent(tools=[], provider=provider), "hi", workspace=workspace).session_id)
        in_code = Agent(tools=[], provider=provider, skills={"dirs": [tmp_path / "code-skills"]})
        by_code = spec_of(app, app.run_sync(in_code, "hi", workspace=workspace).session_id)
    assert [s["name"] for s in by_file["skills"]] == ["from-file"]
    assert [s["name"] for s in by_code["skills"]] == ["from-code"]


@pytest.mark.parametrize("given, words", [
    ({"compaction": {"auto": "yes"}}, "compaction auto: expected true or false"),
    ({"compaction": {"keep_recent": True}}, "compaction keep_recent"),
    ({"compaction": {"threshold": 2}}, "compaction threshold"),
    ({"compaction": {"size": 1}}, "compaction size: unknown key"),
    ({"compaction": "auto"}, "compaction takes a mapping"),
    ({"effects": {"trim_tool_results_after_turns": True}}, "trim_tool_results_after_turns must be a whole number"),
    ({"effects": {"trim": 1}}, "unknown key(s) in [effects]: trim"),
    ({"skills": {"dirs": "shared"}}, "[skills] dirs must be a list"),
    ({"skills": {"folders": []}}, "unknown key(s) in [skills]: folders"),
])
def test_a_bad_table_in_code_is_refused_where_it_is_written(given, words):
    with pytest.raises(ChronicleError) as refused:
        Agent(**given)
    assert refused.value.code == 2 and words in str(refused.value)


@pytest.mark.parametrize("table", [{"compaction": {"auto": False}}, {"effects": {"trim_tool_results_to_chars": 9}},
                                   {"skills": {"dirs": []}}])
def test_a_sub_agent_with_its_own_table_is_refused_before_anything_is_recorded(db_url, workspace, tmp_path, table):
    agent = Agent(tools=[], provider=scripted(tmp_path, answers(1)), agents=[Agent("helper", tools=[], **table)])
    with Chronicle(db_url) as app:
        with pytest.raises(ChronicleError) as refused:
            app.run_sync(agent, "hi", workspace=workspace)
        assert refused.value.code == 2 and f"helper: {next(iter(table))} is set on the top-level agent" in str(refused.value)
        assert recorded_sessions(app) == []


def test_a_continued_session_says_it_keeps_its_recorded_compaction(db_url, workspace, tmp_path):
    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=[], provider=scripted(tmp_path, answers(2))), "hi", workspace=workspace).session_id
        other = Agent(tools=[], provider=scripted(tmp_path, answers(2)), compaction={"auto": False})
        with pytest.warns(Warning, match="compaction"):
            result = app.run_sync(other, "again", session=sid)
        assert any("compaction" in note for note in result.notes)
