"""The seeds' features a program reaches through `import chronicle` as `make demo-seeds` reaches them through the CLI:
the workspace's skills, self-repair's findings, a heartbeat routine defined in code, and the cost guard's limits
given on an Agent. Each answers what the command's --json prints, on both backends."""

from __future__ import annotations

import json

import pytest

from chronicle import Agent, Chronicle, ChronicleError, ChronicleWarning, Routine, tool
from tests.helpers import cli, json_lines, response, text, tool_use
from tests.sse_server import HttpError, reply, sse  # noqa: F401 - the loopback Messages API fixture

SKILL = "---\nname: release-notes\ndescription: Write release notes\nwhen_to_use: asked for release notes\n---\n1. Read CHANGES.md.\n"


def scripted(tmp_path, **agents) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": agents}), encoding="utf-8")
    return f"scripted:{path}"


def spec_of(app: Chronicle, sid: str) -> dict:
    [started] = [e for e in app.log(sid) if e["event"] == "Started" and e["aggregate"] == "session"]
    return started["data"]["spec"]


@tool()
async def flaky_sensor(sensor: str) -> str:
    """Read a sensor that is broken: it raises, which self-repair counts as a failed run."""
    raise RuntimeError(f"sensor {sensor} does not answer")


def test_skills_lists_the_workspace_skills_as_the_cli_does_and_a_broken_one_is_code_2(workspace, tmp_path):
    (workspace / "skills" / "release-notes").mkdir(parents=True)
    (workspace / "skills" / "release-notes" / "SKILL.md").write_text(SKILL, encoding="utf-8")
    app = Chronicle(f"sqlite:///{tmp_path / 'c.db'}")
    rows = app.skills(workspace=workspace)
    assert [(r["name"], r["mode"], r["when_to_use"]) for r in rows] == [("release-notes", "on_demand", "asked for release notes")]
    assert rows == json_lines(cli("skills", "--workspace", str(workspace), "--json").stdout)
    assert not (tmp_path / "c.db").exists()  # files only: listing skills opens no store
    (workspace / "skills" / "broken").mkdir()
    (workspace / "skills" / "broken" / "SKILL.md").write_text("---\nname: broken\n", encoding="utf-8")
    with pytest.raises(ChronicleError) as broken:
        app.skills(workspace=workspace)
    assert broken.value.code == 2 and "skills/broken/SKILL.md" in str(broken.value)
    with pytest.raises(ChronicleError) as nowhere:
        app.skills(workspace=tmp_path / "missing")
    assert nowhere.value.code == 2 and "is not a directory" in str(nowhere.value)


def test_repairs_check_finds_a_broken_tool_and_lists_what_the_cli_lists(db_url, workspace, tmp_path):
    calls = [response(tool_use(f"f{i}", "flaky_sensor", sensor="door")) for i in range(2)] + [response(text("The sensor is down."))]
    agent = Agent(tools=[flaky_sensor], provider=scripted(tmp_path, main=calls))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "read the door sensor", workspace=workspace).session_id
        assert app.repairs() == []  # nothing found until a check looks (a read of no store at all is refused)
        [found] = app.repairs(check=True, tool_failures=2)
        assert (found["kind"], found["status"], found["session_id"]) == ("broken_tool", "manual_required", sid)
        assert "flaky_sensor" in found["target"]
        assert app.repairs() == json_lines(cli("repairs", "--json", db=db_url).stdout) == [found]
        assert "manual_required" in {r["status"] for r in app.audit(session=sid) if r["kind"] == "repair"}
        with pytest.raises(ChronicleError) as refused:
            app.repairs(check=True, tool_failures=0)
        assert refused.value.code == 2 and "tool_failures" in str(refused.value)


def test_a_heartbeat_routine_in_code_needs_no_trigger_or_prompt_as_its_table_needs_none(db_url, workspace, tmp_path):
    (workspace / "HEARTBEAT.md").write_text("# Checklist\n- is CHANGES.md up to date?\n", encoding="utf-8")
    agent = Agent(tools=[], provider=scripted(tmp_path, **{"routine-heartbeat": [[response(text("CHANGES.md lacks v2.1."))]]}))
    heartbeat = Routine("heartbeat", heartbeat=True)
    with Chronicle(db_url) as app:
        [listed] = app.routines(workspace=workspace, routines=[heartbeat])
        assert (listed["trigger"], listed["heartbeat"], listed["prompt"]) == ("cron:*/30 * * * *", True, "")
        ran = app.run_routine(heartbeat, workspace=workspace, agent=agent)
        assert (ran["status"], ran["summary"]) == ("completed", "CHANGES.md lacks v2.1.")
        asked = app.history(ran["session_id"])[0]["content"][0]["text"]
        assert "<heartbeat_checklist>" in asked and "CHANGES.md up to date" in asked
        with pytest.raises(ChronicleError) as untriggered:
            app.routines(workspace=workspace, routines=[Routine("todo", prompt="Check TODO.md.")])
        assert untriggered.value.code == 2 and "trigger is required" in str(untriggered.value)


def test_agent_limits_are_the_cost_guards_recorded_on_the_session_and_kept_when_it_continues(db_url, workspace, tmp_path):
    twice = response(tool_use("a", "list_dir", path="."), tool_use("b", "list_dir", path="."))
    provider = scripted(tmp_path, main=[[twice, response(text("listed"))], [response(text("again"))]])
    agent = Agent(tools=["list_dir"], limits={"max_tool_calls": 1, "budget_usd": 2.5}, provider=provider)
    with Chronicle(db_url) as app:
        stopped = app.run_sync(agent, "list it twice", workspace=workspace)
        assert (stopped.status, stopped.exit_code) == ("stopped", 4)
        assert "tool-call limit reached: 1 per turn (Agent(limits={'max_tool_calls': ...}))" in (stopped.reason or "")
        limits = spec_of(app, stopped.session_id)["limits"]
        assert (limits["max_tool_calls"], limits["budget_usd"]) == (1, 2.5)
        wider = Agent(tools=["list_dir"], limits={"max_tool_calls": 5, "budget_usd": 2.5}, provider=provider)
        with pytest.warns(ChronicleWarning, match="the Agent's limits ignored"):
            again = app.run_sync(wider, "again", session=stopped.session_id)
        assert any("limits ignored" in n for n in again.notes)
        same = app.run_sync(agent, "once more", session=stopped.session_id)
        assert not any("limits" in n for n in same.notes)


@pytest.mark.parametrize(("limits", "words"), [
    ({"budget_usd": "2"}, "budget_usd: expected a number"),
    ({"budget": 2}, "budget: unknown key; allowed: budget_usd, daily_budget_usd"),
    ({"max_calls_per_hour": 0}, "max_calls_per_hour"),
    (3, "limits takes a mapping"),
    ({1: 2}, "limits: keys are the names of [limits]' settings, like 'budget_usd'; got 1"),
    ({"budget_usd": float("nan")}, "budget_usd: expected a finite number"),
])
def test_agent_limits_that_cannot_work_are_refused_where_written(limits, words):
    with pytest.raises(ChronicleError) as refused:
        Agent(limits=limits)
    assert refused.value.code == 2 and words in str(refused.value)


def test_limits_belong_to_the_top_level_agent_and_doom_loop_is_given_once():
    with pytest.raises(ChronicleError) as child:
        Agent(agents=[Agent(name="helper", limits={"max_tool_calls": 3})]).registry()
    assert child.value.code == 2 and "helper: limits are set on the top-level agent" in str(child.value)
    with pytest.raises(ChronicleError) as twice:
        Agent(doom_loop=2, limits={"doom_loop": 4})
    assert twice.value.code == 2 and "doom_loop is given twice" in str(twice.value)
    assert Agent(limits={"doom_loop": 4}).registry().main.limits == {"doom_loop": 4}



def test_max_attempts_bounds_the_retries_of_a_model_call_as_run_max_attempts_does(db_url, workspace, sse, monkeypatch):
    """Seed 000's retry loop (429/529 retried with backoff) from code: `run(max_attempts=)` as `run --max-attempts`."""
    for name, value in {"ANTHROPIC_BASE_URL": sse.url, "ANTHROPIC_API_KEY": "sk-ant-api-dummy-123456",
                        "CHRONICLE_RETRY_BASE_S": "0.01"}.items():
        monkeypatch.setenv(name, value)
    agent = Agent(tools=[], provider="anthropic", model="claude-sonnet-4-6")
    with Chronicle(db_url) as app:
        sse.script(*[HttpError(529, "overloaded_error", "Overloaded")] * 2)
        gave_up = app.run_sync(agent, "hello", workspace=workspace, max_attempts=2)
        assert gave_up.status == "failed" and "Overloaded" in (gave_up.reason or "") and len(sse.requests) == 2
        assert len([r for r in app.audit(session=gave_up.session_id) if r["kind"] == "retry"]) == 1
        sse.script(HttpError(529, "overloaded_error", "Overloaded"), reply([{"type": "text", "text": "at last"}]))
        patient = app.run_sync(agent, "hello", workspace=workspace, max_attempts=2)
        assert (patient.status, patient.text) == ("completed", "at last")
        with pytest.raises(ChronicleError) as refused:
            app.run_sync(agent, "hello", workspace=workspace, max_attempts=0)
        assert refused.value.code == 2 and "max_attempts" in str(refused.value)


def test_an_agent_in_code_records_the_workspace_skill_dirs_and_effects_as_run_does(db_url, workspace, tmp_path):
    """`Chronicle.skills()` lists chronicle.toml's [skills] dirs, and `chronicle run` records them and [effects]; a
    program's session recorded neither, silently (its own skills/ only, no trimming)."""
    (tmp_path / "team-skills" / "deploy").mkdir(parents=True)
    (tmp_path / "team-skills" / "deploy" / "SKILL.md").write_text("---\nname: deploy\ndescription: Ship it\n---\nSteps.\n",
                                                                   encoding="utf-8")
    (workspace / "chronicle.toml").write_text('[skills]\ndirs = ["../team-skills"]\n\n[effects]\n'
                                              "trim_tool_results_after_turns = 2\ntrim_tool_results_to_chars = 50\n",
                                              encoding="utf-8")
    provider = scripted(tmp_path, main=[response(text("ok"))])
    ran = cli("run", "hi", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert ran.returncode == 0, ran.stderr
    with Chronicle(db_url) as app:
        assert [s["name"] for s in app.skills(workspace=workspace)] == ["deploy"]
        by_cli = spec_of(app, json_lines(ran.stdout)[0]["session_id"])
        in_code = spec_of(app, app.run_sync(Agent(tools=["read_file"], provider=provider), "hi", workspace=workspace).session_id)
        for spec in (by_cli, in_code):
            assert [s["name"] for s in spec["skills"]] == ["deploy"] and "load_skill" in spec["tools"]
            assert (spec["trim_tool_results_after_turns"], spec["trim_tool_results_to_chars"]) == (2, 50)
        (workspace / "chronicle.toml").write_text("[effects]\ntrim_tool_results_to_chars = -1\n", encoding="utf-8")
        with pytest.raises(ChronicleError) as refused:
            app.run_sync(Agent(tools=[], provider=provider), "hi", workspace=workspace)
        assert refused.value.code == 2 and "[effects] trim_tool_results_to_chars" in str(refused.value)
