"""Background jobs and routines from Python, on both backends: the same use cases as `chronicle jobs` and
`chronicle routines`, returning what their --json prints; routines may be defined in code."""

from __future__ import annotations

import base64
import json
import os
import warnings

import pytest

from chronicle import Agent, Chronicle, ChronicleError, Routine
from tests.helpers import cli, json_lines, response, text, tool_use


def scripted(tmp_path, **agents):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": agents}), encoding="utf-8")
    return f"scripted:{path}"


def test_a_job_submitted_from_code_is_listed_as_the_cli_lists_it_and_run_by_a_worker(db_url, workspace, tmp_path):
    agent = Agent(tools=["read_file"], provider=scripted(tmp_path, main=[[response(text("Summarised."))]]))
    with Chronicle(db_url) as app:
        row = app.submit_job(agent, "summarise hello.txt", workspace=workspace)
        assert (row["status"], row["origin"], row["prompt"]) == ("queued", "api", "summarise hello.txt")
        assert app.jobs() == json_lines(cli("jobs", "--json", db=db_url).stdout)
    worked = cli("worker", "--once", db=db_url)
    assert worked.returncode == 0, worked.stderr
    with Chronicle(db_url) as app:
        done = app.job(row["job_id"][:8])
        assert (done["status"], done["final_text"]) == ("completed", "Summarised.")
        assert [done] == json_lines(cli("jobs", "status", row["job_id"], "--json", db=db_url).stdout)


def test_a_job_cancelled_from_code_is_never_started(db_url, workspace, tmp_path):
    agent = Agent(tools=[], provider=scripted(tmp_path, main=[[response(text("never"))]]))
    with Chronicle(db_url) as app:
        job_id = app.submit_job(agent, "do it", workspace=workspace)["job_id"]
        assert app.cancel_job(job_id)["status"] == "cancelled"
    assert cli("worker", "--once", db=db_url).returncode == 0
    with Chronicle(db_url) as app:
        assert app.job(job_id)["status"] == "cancelled" and app.job(job_id)["turns"] == 0
        with pytest.raises(ChronicleError) as not_a_job:
            app.job(app.run_sync(agent, "hi", workspace=workspace).session_id)
        assert not_a_job.value.code == 1 and "is not a job" in str(not_a_job.value)


def test_a_routine_defined_in_code_runs_with_its_guardrails_and_its_history_is_the_clis(db_url, workspace, tmp_path):
    agent = Agent(tools=[], provider=scripted(tmp_path, **{"routine-todo": [[response(text("Two items overdue."))]]}))
    todo = Routine("todo", trigger="manual", prompt="Check TODO.md.", max_runs_per_day=1)
    with Chronicle(db_url) as app:
        first = app.run_routine(todo, workspace=workspace, agent=agent)
        assert (first["routine"], first["status"], first["summary"]) == ("todo", "completed", "Two items overdue.")
        second = app.run_routine(todo, workspace=workspace, agent=agent)
        assert second["status"] == "skipped" and "max_runs_per_day" in second["reason"]
        history = app.routine_history(workspace=workspace)
        assert [h["status"] for h in history] == ["completed", "skipped"]
        assert history == json_lines(cli("routines", "history", "--workspace", str(workspace), "--json", db=db_url).stdout)
        assert app.routines(workspace=workspace, routines=[todo])[0] | {"next_due": None} == {
            "name": "todo", "trigger": "manual", "action": "lightweight", "next_due": None, "prompt": "Check TODO.md.",
            "heartbeat": False, "max_runs_per_day": 1, "budget_usd": None, "cooldown_s": None, "notify": None}


def test_a_routine_in_chronicle_toml_is_listed_and_run_by_name(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text('[routines.nightly]\ntrigger = "cron:0 3 * * *"\nprompt = "Report."\naction = "job"\n',
                                              encoding="utf-8")
    agent = Agent(tools=[], provider=scripted(tmp_path, **{"routine-nightly": [[response(text("Quiet."))]]}))
    with Chronicle(db_url) as app:
        assert app.routines(workspace=workspace) == json_lines(cli("routines", "list", "--workspace", str(workspace), "--json").stdout)
        queued = app.run_routine("nightly", workspace=workspace, agent=agent)
        assert queued["status"] == "queued"
        assert app.resume(queued["session_id"]).text == "Quiet."


def test_auto_approve_given_to_a_job_routine_is_warned_of_by_the_library_and_the_cli_not_dropped(db_url, workspace, tmp_path):
    """A job is queued for a worker, which approves as it was started: auto_approve (`routines run --yes`) decided
    nothing, without a word. A lightweight routine runs here, where it applies: nothing is said."""
    from chronicle import ChronicleWarning

    (workspace / "chronicle.toml").write_text('[routines.nightly]\ntrigger = "manual"\nprompt = "Report."\naction = "job"\n'
                                              '[routines.quick]\ntrigger = "manual"\nprompt = "Look."\n', encoding="utf-8")
    provider = scripted(tmp_path, **{"routine-quick": [[response(text("Seen."))]]})
    agent = Agent(tools=[], provider=provider)
    line = ("note: auto_approve ignored: routine nightly is a job, queued for a worker, which approves as it was started "
            "(`chronicle worker --yes`)")
    with Chronicle(db_url) as app:
        with pytest.warns(ChronicleWarning) as caught:
            assert app.run_routine("nightly", workspace=workspace, agent=agent, auto_approve=True)["status"] == "queued"
        assert [str(w.message) for w in caught if issubclass(w.category, ChronicleWarning)] == [line]
        with warnings.catch_warnings(record=True) as quiet:
            warnings.simplefilter("always")
            assert app.run_routine("quick", workspace=workspace, agent=agent, auto_approve=True)["status"] == "completed"
        assert [w for w in quiet if issubclass(w.category, ChronicleWarning)] == []
    said = cli("routines", "run", "nightly", "--yes", "--provider", provider, "--workspace", str(workspace), db=db_url)
    assert said.returncode == 0, said.stderr
    assert line.replace("auto_approve", "--yes") in " ".join(said.stderr.split())


def test_a_routine_that_is_not_valid_is_refused_with_the_field_named(db_url, workspace):
    with Chronicle(db_url) as app:
        with pytest.raises(ChronicleError) as bad:
            app.run_routine(Routine("x", trigger="cron:every day", prompt="hi"), workspace=workspace)
        assert bad.value.code == 2 and "'every day' is not a cron expression" in str(bad.value)
        with pytest.raises(ChronicleError) as unknown:
            app.run_routine("nope", workspace=workspace)
        assert unknown.value.code == 2 and "no routine named 'nope'" in str(unknown.value)


def test_a_programs_tick_fires_a_due_cron_slot_once_and_settles_it_after_its_session_ran(db_url, workspace, tmp_path):
    agent = Agent(tools=[], provider=scripted(tmp_path, **{"routine-every": [[response(text("Checked."))]]}))
    every = Routine("every", trigger="cron:* * * * *", prompt="Check.")
    with Chronicle(db_url) as app:
        [fired] = app.tick_routines(workspace=workspace, routines=[every], agent=agent)
        assert fired["status"] == "queued"
        with Chronicle(db_url) as other:  # another process's tick: that slot was fired already (a new minute may fire its own)
            again = other.tick_routines(workspace=workspace, routines=[every], agent=agent)
        assert fired["run_id"] not in [r["run_id"] for r in again]
        assert app.resume(fired["session_id"]).status == "completed"
        app.tick_routines(workspace=workspace, routines=[every], agent=agent)
        run = next(r for r in app.routine_history(workspace=workspace) if r["run_id"] == fired["run_id"])
        assert (run["status"], run["summary"]) == ("completed", "Checked.")


def _job_ended(app, tmp_path, workspace, ending):
    """A job brought to `ending` (completed, failed, stopped, cancelled) the way a worker would, or a user cancelling it."""
    read = tool_use("r1", "read_file", path="hello.txt")
    scripts = {
        "completed": ([[response(text("Done."))]], {}),
        "failed": ([[response(read)]], {"max_iterations": 1}),  # max_iterations reached
        "stopped": ([[response(read)], [response(read)], [response(read)]], {}),  # the doom-loop guard
        "cancelled": ([[response(tool_use("b1", "bash", command="echo hi"))]], {}),  # paused for approval, then cancelled
    }
    steps, extra = scripts[ending]
    agent = Agent(tools=["read_file", "bash"], provider=scripted(tmp_path, main=[s for step in steps for s in step]), **extra)
    job_id = app.submit_job(agent, "do it", workspace=workspace)["job_id"]
    app.resume(job_id)
    if ending == "cancelled":
        assert app.job(job_id)["status"] == "awaiting_approval"
        app.cancel(job_id)
    assert app.job(job_id)["status"] == ending
    return job_id


@pytest.mark.parametrize("ending", ["completed", "failed", "stopped", "cancelled"])
def test_cancelling_a_job_that_already_ended_is_refused_and_records_nothing(db_url, workspace, tmp_path, ending):
    with Chronicle(db_url) as app:
        job_id = _job_ended(app, tmp_path, workspace, ending)
        before, log_before = app.job(job_id), app.log(job_id)
        with pytest.raises(ChronicleError) as refused:
            app.cancel_job(job_id)
        assert refused.value.code == 1
        message = str(refused.value)
        assert "\n" not in message and f"job {job_id} already ended: {ending}" in message and "nothing to cancel" in message
        assert app.job(job_id) == before and app.log(job_id) == log_before
        assert [e["status"] for e in app.audit(session=job_id) if e["kind"] == "job"] == ["submitted"]


def test_a_queued_or_paused_job_is_cancelled_once_and_a_second_cancel_is_refused(db_url, workspace, tmp_path):
    agent = Agent(tools=["bash"], provider=scripted(tmp_path, main=[response(tool_use("b1", "bash", command="echo hi"))]))
    with Chronicle(db_url) as app:
        queued = app.submit_job(agent, "never run", workspace=workspace)["job_id"]
        paused = app.submit_job(agent, "pause", workspace=workspace)["job_id"]
        app.resume(paused)
        assert (app.job(queued)["status"], app.job(paused)["status"]) == ("queued", "awaiting_approval")
        for job_id in (queued, paused):
            assert app.cancel_job(job_id)["status"] == "cancelled"
            with pytest.raises(ChronicleError) as again:
                app.cancel_job(job_id)
            assert again.value.code == 1 and "already ended: cancelled (cancelled by the user)" in str(again.value)
            assert [e["status"] for e in app.audit(session=job_id) if e["kind"] == "job"] == ["submitted", "cancelled"]


def test_a_routine_whose_session_was_erased_is_in_the_history_as_erased_and_starts_its_session_anew(db_url, workspace, tmp_path,
                                                                                                     monkeypatch):
    """`chronicle forget` of a lightweight routine's session: its runs stay in `routine_history` as `erased` (what
    `routines history --json` prints), and the next `run_routine` starts the routine's session anew, naming the erased
    one, where it raised ChronicleError on the erased session."""
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", base64.b64encode(os.urandom(32)).decode())  # erasure needs it from the start
    agent = Agent(tools=[], provider=scripted(tmp_path, **{"routine-todo": [[response(text("FIRST"))], [response(text("SECOND"))]]}))
    todo = Routine("todo", trigger="manual", prompt="Check TODO.md.")
    with Chronicle(db_url) as app:
        first = app.run_routine(todo, workspace=workspace, agent=agent)
    assert cli("forget", first["session_id"], "--yes", db=db_url).returncode == 0
    with Chronicle(db_url) as app:
        [erased] = app.routine_history(workspace=workspace)
        assert (erased["run_id"], erased["session_id"], erased["status"]) == (first["run_id"], first["session_id"], "erased")
        assert erased["erased_at"] and erased["summary"] == "" and "FIRST" not in json.dumps(erased)
        second = app.run_routine(todo, workspace=workspace, agent=agent)
        assert (second["status"], second["summary"], second["replaces_session_id"]) == ("completed", "FIRST", first["session_id"])
        assert second["session_id"] != first["session_id"]
        history = app.routine_history(workspace=workspace)
        assert [(h["status"], h["session_id"]) for h in history] == [("erased", first["session_id"]), ("completed", second["session_id"])]
        assert history == json_lines(cli("routines", "history", "--workspace", str(workspace), "--json", db=db_url).stdout)


def test_a_job_cancelled_before_it_started_is_not_run_by_resume_in_code_nor_by_the_cli(db_url, workspace, tmp_path):
    """Workers never start a cancelled job; `resume(job_id)` (and `chronicle resume JOB` / `--all`) ran it all the same,
    answering its prompt while `jobs` still listed it cancelled."""
    agent = Agent(tools=[], provider=scripted(tmp_path, main=[[response(text("never"))], [response(text("never"))]]))
    with Chronicle(db_url) as app:
        job_id = app.submit_job(agent, "do it", workspace=workspace)["job_id"]
        app.cancel_job(job_id)
        resumed = app.resume(job_id)
        assert (resumed.status, resumed.text, resumed.exit_code) == ("idle", "", 0)
        assert "was cancelled before it started" in (resumed.reason or "")
    one = cli("resume", job_id, db=db_url)
    every = cli("resume", "--all", db=db_url)
    assert (one.returncode, every.returncode) == (0, 0), one.stderr + every.stderr
    assert "was cancelled before it started" in one.stdout + one.stderr
    with Chronicle(db_url) as app:
        assert (app.job(job_id)["status"], app.job(job_id)["turns"]) == ("cancelled", 0)


@pytest.mark.parametrize("fields, said", [
    ({"trigger": "bogus", "prompt": "x"}, 'trigger must be "cron:EXPR", "event:PATTERN" or "manual"'),
    ({"trigger": "cron:61 * * * *", "prompt": "x"}, "is not a cron expression that ever fires"),
    ({"trigger": "manual"}, "prompt is required"),
    ({"trigger": "manual", "prompt": "x", "max_runs_per_day": -1}, "max_runs_per_day must be a non-negative number"),
])
def test_a_routine_is_checked_where_the_program_writes_it(fields, said):
    """As Agent(...) is: each of these was accepted by Routine(...) and refused only at app.routines(...)."""
    with pytest.raises(ChronicleError) as refused:
        Routine("r1", **fields)
    assert refused.value.code == 2 and said in str(refused.value) and isinstance(refused.value, ValueError)
    assert Routine("hb", heartbeat=True).heartbeat and Routine("ok", trigger="manual", prompt="go").prompt == "go"
