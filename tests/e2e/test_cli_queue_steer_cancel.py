"""Queue, steering and cancel driven from a second process, as a person would from a second shell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid

from tests import processes
from tests.e2e.controls_helpers import Background, history_of, log_of, tool_events
from tests.helpers import cli, json_lines, response, text, tool_use

GATE = "while [ ! -f go ]; do sleep 0.05; done"


def script(path, turns):
    path.write_text(json.dumps({"agents": {"main": turns}}), encoding="utf-8")
    return f"scripted:{path}"


def test_inputs_sent_to_a_busy_session_are_queued_and_run_in_order_by_the_running_process(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [
        [response(tool_use("tu_1", "bash", command=GATE)), response(text("one"))],
        [response(text("two"))], [response(text("three"))],
    ])
    first = Background("run", "first", "--provider", provider, "--workspace", str(workspace), "--yes", "--json", db=db_url)
    sid = first.wait_for(lambda e: e["type"] == "tool_start")["session_id"]

    for prompt in ("second", "third"):
        queued = cli("run", prompt, "--session", sid, "--json", db=db_url)
        assert queued.returncode == 0, queued.stderr
        end = json_lines(queued.stdout)[-1]
        assert end["type"] == "agent_end" and end["status"] == "queued" and "another process" in end["reason"]
    (workspace / "go").touch()

    assert first.finish() == 0, first.stderr
    ends = [e for e in first.events if e["type"] == "turn_end"]
    assert [(e["status"], e["text"]) for e in ends] == [("completed", "one"), ("completed", "two"), ("completed", "three")]
    assert first.events[-1]["type"] == "agent_end"
    inputs = [e["data"]["input_text"] for e in log_of(sid, db_url) if e["aggregate"] == "turn" and e["event"] == "Created"]
    assert inputs == ["first", "second", "third"]


def test_steering_skips_tools_not_yet_started_and_reaches_the_model_with_the_results(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [
        response(
            tool_use("tu_1", "bash", command=f"{GATE}; echo first-done"),
            tool_use("tu_2", "bash", command="echo second > second.txt"),
            tool_use("tu_3", "read_file", path="hello.txt"),
        ),
        response(text("Changed course.")),
    ])
    run = Background("run", "work", "--provider", provider, "--workspace", str(workspace), "--yes", "--json", db=db_url)
    sid = run.wait_for(lambda e: e["type"] == "tool_start" and e["tool_use_id"] == "tu_1")["session_id"]

    steer = cli("steer", sid, "forget the rest, just say hi", db=db_url)
    assert steer.returncode == 0, steer.stderr
    assert "steering recorded" in steer.stdout
    (workspace / "go").touch()

    assert run.finish() == 0, run.stderr
    log = log_of(sid, db_url)
    assert tool_events(log, "tu_1")[-2:] == ["Started", "Completed"]
    assert tool_events(log, "tu_2")[-1] == "Skipped" and "Started" not in tool_events(log, "tu_2")
    assert tool_events(log, "tu_3") == ["Requested", "Skipped"]
    assert not (workspace / "second.txt").exists()
    assert any(e["event"] == "SteeringDelivered" for e in log)

    history = history_of(sid, db_url)
    results_message = next(m for m in history if m["role"] == "user" and any(b["type"] == "tool_result" for b in m["content"]))
    kinds = [b["type"] for b in results_message["content"]]
    assert kinds == ["tool_result", "tool_result", "tool_result", "text"]
    assert "first-done" in results_message["content"][0]["content"]
    assert "steering message" in results_message["content"][1]["content"]
    assert results_message["content"][3]["text"] == "forget the rest, just say hi"


def test_steering_in_wait_for_batch_mode_lets_every_tool_of_the_step_run(sqlite_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [
        response(tool_use("tu_1", "bash", command=f"{GATE}; echo a"), tool_use("tu_2", "bash", command="echo b > b.txt")),
        response(text("ok")),
    ])
    run = Background("run", "work", "--provider", provider, "--workspace", str(workspace), "--yes", "--json", db=sqlite_url)
    sid = run.wait_for(lambda e: e["type"] == "tool_start" and e["tool_use_id"] == "tu_1")["session_id"]
    assert cli("steer", sid, "also check c", "--wait-batch", db=sqlite_url).returncode == 0
    (workspace / "go").touch()
    assert run.finish() == 0, run.stderr
    assert (workspace / "b.txt").read_text().strip() == "b"
    results = next(m for m in history_of(sid, sqlite_url) if any(b["type"] == "tool_result" for b in m["content"]))
    assert [b["type"] for b in results["content"]] == ["tool_result", "tool_result", "text"]


def test_steer_with_turn_refuses_a_turn_that_has_ended_and_steers_the_running_one(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [
        [response(text("one"))],
        [response(tool_use("tu_1", "bash", command=GATE)), response(text("two"))],
    ])
    first = json_lines(cli("run", "first", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url).stdout)
    sid, ended = first[0]["session_id"], next(e["turn_id"] for e in first if e["type"] == "turn_start")

    idle = cli("steer", sid, "too late", "--turn", ended, db=db_url)
    assert idle.returncode == 1 and idle.stdout == ""
    assert idle.stderr.count("\n") == 1 and f"turn {ended} has ended (no turn is running)" in idle.stderr
    assert cli("steer", sid, "x", "--turn", "nope", db=db_url).returncode == 2

    run = Background("run", "second", "--session", sid, "--provider", provider, "--yes", "--json", db=db_url)
    running = run.wait_for(lambda e: e["type"] == "turn_start")["turn_id"]
    run.wait_for(lambda e: e["type"] == "tool_start")
    stale = cli("steer", sid, "too late", "--turn", ended, db=db_url)
    assert stale.returncode == 1 and f"turn {running} is running now" in stale.stderr
    steer = cli("steer", sid, "now this", "--turn", running, "--json", db=db_url)
    assert steer.returncode == 0, steer.stderr
    assert json_lines(steer.stdout)[0] == {**json_lines(steer.stdout)[0], "outcome": "steering", "turn_id": running}
    (workspace / "go").touch()
    assert run.finish() == 0, run.stderr

    log = log_of(sid, db_url)
    assert [e["data"]["text"] for e in log if e["event"] == "SteeringQueued"] == ["now this"]
    assert [e["data"]["input_text"] for e in log if e["aggregate"] == "turn" and e["event"] == "Created"] == ["first", "second"]


def test_steering_with_no_turn_running_becomes_the_next_queued_input(sqlite_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [[response(text("one"))], [response(text("two"))], [response(text("three"))]])
    sid = json_lines(cli("run", "first", "--provider", provider, "--workspace", str(workspace), "--json", db=sqlite_url).stdout)[0]["session_id"]
    steer = cli("steer", sid, "later please", "--json", db=sqlite_url)
    assert json_lines(steer.stdout)[0]["outcome"] == "queued"
    run = cli("run", "third", "--session", sid, "--json", db=sqlite_url)
    assert run.returncode == 0, run.stderr
    starts = [e for e in json_lines(run.stdout) if e["type"] == "turn_start"]
    assert [e["input"] for e in starts] == ["later please", "third"]
    assert starts[0]["input_id"] == json_lines(steer.stdout)[0]["steer_id"] and starts[1]["input_id"] != starts[0]["input_id"]


def test_a_turn_that_answers_a_queued_input_is_named_in_run_and_chat_so_two_answers_do_not_read_as_one(sqlite_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [[response(text(f"answer {n}"))] for n in range(1, 6)])
    sid = json_lines(cli("run", "first", "--provider", provider, "--workspace", str(workspace), "--json", db=sqlite_url).stdout)[0]["session_id"]
    steer = cli("steer", sid, "later please", db=sqlite_url)
    assert f"resume {sid}` runs it now" in steer.stdout

    run = cli("run", "mine", "--session", sid, db=sqlite_url)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert out.index("↳ an earlier input: later please") < out.index("answer 2") < out.index("↳ your input: mine") < out.index("answer 3")
    plain = cli("run", "alone", "--session", sid, db=sqlite_url)
    assert "answer 4" in plain.stdout and "↳" not in plain.stdout  # nothing queued: nothing named

    cli("steer", sid, "queued for chat", db=sqlite_url)
    chat = cli("chat", "--session", sid, "--workspace", str(workspace), db=sqlite_url, input="typed\n/quit\n")
    assert chat.returncode == 0, chat.stderr
    said = chat.stdout
    assert "1 input(s) queued on this session run before your next message" in said
    assert said.index("↳ an earlier input: queued for chat") < said.index("answer 5") < said.index("↳ your input: typed")


def test_a_run_whose_prompt_never_ran_says_it_waits_in_the_queue_and_resume_runs_it(sqlite_url, workspace, tmp_path):
    """An earlier queued input's turn stops the drive (here: paused for approval), so the run's exit code is that
    turn's; without a line saying so, a user read the pause (or a cancel) as their own prompt's."""
    provider = script(tmp_path / "s.json", [[response(text("one"))],
                                           [response(tool_use("b", "bash", command="echo hi")), response(text("two"))],
                                           [response(text("mine done"))], [response(text("last done"))]])
    sid = json_lines(cli("run", "first", "--provider", provider, "--workspace", str(workspace), "--json", db=sqlite_url).stdout)[0]["session_id"]
    assert cli("steer", sid, "earlier", db=sqlite_url).returncode == 0
    run = cli("run", "mine", "--session", sid, db=sqlite_url)
    assert run.returncode == 3, run.stderr  # the earlier input's turn waits for approval
    assert "note: this prompt has not run" in run.stderr and f"resume {sid}" in run.stderr
    resumed = cli("resume", sid, "--yes", db=sqlite_url)
    assert resumed.returncode == 0 and "mine done" in resumed.stdout, resumed.stderr
    last = cli("run", "last", "--session", sid, db=sqlite_url)
    assert last.returncode == 0 and "note:" not in last.stderr, last.stderr  # its own prompt ran: nothing to say


def test_an_input_queued_while_a_run_works_is_run_after_its_own_and_named_as_later(sqlite_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [[response(tool_use("g", "bash", command=GATE)), response(text("mine done"))],
                                           [response(text("extra done"))]])
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY", "CHRONICLE_DB")}
    first = processes.start([sys.executable, "-m", "chronicle.runtime.cli", "run", "mine", "--provider", provider, "--workspace",
                             str(workspace), "--yes"], env={**env, "CHRONICLE_DB": sqlite_url, "COLUMNS": "200"},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (rows := json_lines(cli("sessions", "--json", db=sqlite_url).stdout)) or rows[0]["status"] != "running":
        assert time.monotonic() < deadline, "the first run did not start"
        time.sleep(0.1)
    sid = rows[0]["session_id"]
    queued = cli("run", "extra", "--session", sid, db=sqlite_url)
    assert queued.returncode == 0 and "queued" in queued.stderr, queued.stderr
    (workspace / "go").touch()
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    assert out.index("mine done") < out.index("↳ a later input: extra") < out.index("extra done")
    assert "↳ your input" not in out  # nothing ran before its own input


def test_cancel_from_another_process_kills_the_running_tool_and_the_session_continues(db_url, workspace, tmp_path):
    marker = f"{30 + uuid.uuid4().int % 1000 / 1000:.3f}"
    provider = script(tmp_path / "s.json", [
        [response(tool_use("tu_1", "bash", command=f"sleep {marker}"), tool_use("tu_2", "bash", command="echo never > never.txt"))],
        [response(text("fresh start"))],
    ])
    run = Background("run", "slow", "--provider", provider, "--workspace", str(workspace), "--yes", "--json", db=db_url)
    sid = run.wait_for(lambda e: e["type"] == "tool_start" and e["tool_use_id"] == "tu_1")["session_id"]

    cancel = cli("cancel", sid, "--json", db=db_url)
    assert cancel.returncode == 0, cancel.stderr
    assert json_lines(cancel.stdout)[0]["status"] == "cancelled"
    assert run.finish(timeout=20) == 130
    assert run.events[-1]["type"] == "agent_end" and run.events[-1]["status"] == "cancelled"

    survivors = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
    assert survivors.stdout.strip() == ""
    assert not (workspace / "never.txt").exists()
    log = log_of(sid, db_url)
    assert tool_events(log, "tu_1")[-1] == "Cancelled" and tool_events(log, "tu_2")[-1] == "Cancelled"
    assert [e["event"] for e in log if e["aggregate"] == "turn"][-1] == "Cancelled"

    again = cli("run", "go on", "--session", sid, "--json", db=db_url)
    assert again.returncode == 0, again.stderr
    assert json_lines(again.stdout)[-1]["status"] == "completed"
    uses = [b["id"] for m in history_of(sid, db_url) for b in m["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for m in history_of(sid, db_url) for b in m["content"] if b["type"] == "tool_result"]
    assert uses == results == ["tu_1", "tu_2"]


def test_cancel_with_nothing_running_says_so_and_succeeds(sqlite_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [response(text("done"))])
    sid = json_lines(cli("run", "hi", "--provider", provider, "--workspace", str(workspace), "--json", db=sqlite_url).stdout)[0]["session_id"]
    cancel = cli("cancel", sid, db=sqlite_url)
    assert cancel.returncode == 0
    assert "nothing is running" in cancel.stdout


def test_a_turn_paused_for_approval_resumes_with_a_second_run_and_then_runs_the_new_input(db_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [
        [response(tool_use("tu_1", "bash", command="echo approved > a.txt")), response(text("first done"))],
        [response(text("second done"))],
    ])
    paused = cli("run", "shell", "--provider", provider, "--workspace", str(workspace), "--json", db=db_url)
    assert paused.returncode == 3
    events = json_lines(paused.stdout)
    sid = events[0]["session_id"]
    assert any(e["type"] == "approval_needed" for e in events)

    resumed = cli("run", "next", "--session", sid, "--yes", "--json", db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    ends = [(e["status"], e["text"]) for e in json_lines(resumed.stdout) if e["type"] == "turn_end"]
    assert ends == [("completed", "first done"), ("completed", "second done")]
    assert (workspace / "a.txt").read_text().strip() == "approved"
    assert tool_events(log_of(sid, db_url), "tu_1") == ["Requested", "ApprovalRequested", "Approved", "Started", "Completed"]


def test_cancel_of_a_turn_waiting_for_approval_answers_its_tool_calls(sqlite_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [[response(tool_use("tu_1", "bash", command="echo x"))], [response(text("after"))]])
    sid = json_lines(cli("run", "shell", "--provider", provider, "--workspace", str(workspace), "--json", db=sqlite_url).stdout)[0]["session_id"]
    cancel = cli("cancel", sid, db=sqlite_url)
    assert cancel.returncode == 0 and "waiting for approval" in cancel.stdout
    after = cli("run", "again", "--session", sid, "--json", db=sqlite_url)
    assert after.returncode == 0, after.stderr
    assert tool_events(log_of(sid, sqlite_url), "tu_1")[-1] == "Cancelled"


def test_resume_names_the_input_each_turn_it_runs_answers(sqlite_url, workspace, tmp_path):
    provider = script(tmp_path / "s.json", [[response(text("first answer"))], [response(text("second answer"))]])
    submitted = cli("submit", "alpha", "--provider", provider, "--workspace", str(workspace), db=sqlite_url)
    sid = submitted.stdout.strip()
    assert cli("steer", sid, "beta", db=sqlite_url).returncode == 0
    resumed = cli("resume", sid, db=sqlite_url)
    assert resumed.returncode == 0, resumed.stderr
    out = resumed.stdout
    assert out.index("↳ input: alpha") < out.index("first answer") < out.index("↳ input: beta") < out.index("second answer")
