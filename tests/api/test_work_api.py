"""`Chronicle.work`: a worker in the program's own process, the one `chronicle worker` runs (compose_worker), on
both backends. Before it a program could queue work (`submit`, `submit_job`) but only another process could run it."""

from __future__ import annotations

import json
import threading
import time

import pytest

from chronicle import Agent, Chronicle, ChronicleError, RunResult
from tests.helpers import cli, response, text


def scripted(tmp_path, **agents):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": agents}), encoding="utf-8")
    return f"scripted:{path}"


def test_work_once_runs_every_queued_job_and_input_and_says_what_it_ran(db_url, workspace, tmp_path):
    provider = scripted(tmp_path, jobber=[[response(text("First done."))]],
                        main=[[response(text("Second done."))], [response(text("Follow-up done."))]])
    with Chronicle(db_url) as app:
        first = app.submit_job(Agent("jobber", tools=[], provider=provider), "first", workspace=workspace)["job_id"]
        agent = Agent(tools=[], provider=provider)
        second, submitted = app.submit(agent, "second", workspace=workspace).values()
        follow_up = app.submit(agent, "follow-up", session=second)["input_id"]
        ran = app.work(once=True, concurrency=1, poll=0.05, log=lambda line: None)
        assert all(isinstance(r, RunResult) for r in ran)
        assert sorted((r.session_id, r.status, r.text) for r in ran) == sorted([
            (first, "completed", "First done."), (second, "completed", "Second done."), (second, "completed", "Follow-up done.")])
        assert [r.text for r in ran if r.session_id == second] == ["Second done.", "Follow-up done."]  # FIFO per session
        assert [r.answered[0].input_id for r in ran if r.session_id == second] == [submitted, follow_up]
        assert app.job(first)["status"] == "completed"
        assert app.work(once=True, poll=0.05, log=lambda line: None) == []  # nothing left: nothing run twice
    # the command's worker finds nothing left either
    assert "stopped after 0 turn(s)" in cli("worker", "--once", db=db_url).stderr


def test_work_stops_when_the_programs_event_is_set_and_returns_what_it_ran(db_url, workspace, tmp_path):
    agent = Agent(tools=[], provider=scripted(tmp_path, main=[[response(text("Ran while waiting."))]]))
    lines: list[str] = []
    stop = threading.Event()
    results: list[list[RunResult]] = []
    with Chronicle(db_url) as app:
        worker = threading.Thread(target=lambda: results.append(app.work(stop=stop, poll=0.05, log=lines.append)))
        worker.start()
        try:
            job = app.submit_job(agent, "later", workspace=workspace)["job_id"]
            deadline = time.monotonic() + 30
            while app.job(job)["status"] != "completed" and time.monotonic() < deadline:
                time.sleep(0.05)
        finally:
            stop.set()
            worker.join(30)
        assert not worker.is_alive()
        assert [(r.session_id, r.status, r.text) for r in results[0]] == [(job, "completed", "Ran while waiting.")]
        assert any("stopped after 1 turn(s)" in line for line in lines)


@pytest.mark.parametrize("bad", [{"poll": 0}, {"concurrency": 0}, {"once": "yes"}, {"lease_s": float("inf")}, {"idle_exit": -1}])
def test_work_refuses_what_the_worker_command_refuses(sqlite_url, bad):
    with Chronicle(sqlite_url) as app:
        with pytest.raises(ChronicleError) as refused:
            app.work(**bad)
        assert refused.value.code == 2 and next(iter(bad)) in str(refused.value)


@pytest.mark.parametrize("name, flag, most, value", [
    ("lease_s", "--lease-s", "86400", 1e20),  # overflowed timedelta at the first claim
    ("poll", "--poll", "86400", 1e20),  # a wait that overflows (threading.Event.wait) or never ends
    ("idle_exit", "--idle-exit", "604800", 1e20),
])
def test_work_refuses_a_wait_beyond_the_commands_bound_naming_the_argument_and_its_range(sqlite_url, name, flag, most, value):
    with Chronicle(sqlite_url) as app:
        with pytest.raises(ChronicleError) as refused:
            app.work(once=True, **{name: value})
        assert refused.value.code == 2
        said = str(refused.value)
        assert said.startswith(f"work(): {name}: ") and most in said and "1e+20" in said, said
        assert app.work(once=True, **{name: float(most)}) == []  # the bound itself is taken
    refused_cli = cli("worker", "--once", flag, str(float(most) + 1), db=sqlite_url, timeout=30)
    assert refused_cli.returncode == 2 and f"≤ {most}" in refused_cli.stderr, refused_cli.stderr
