"""`chronicle chat` in a real terminal (tmux), typed into and read back as a person would."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import uuid

import pytest

from tests.e2e.controls_helpers import log_of
from tests.e2e.terminal import Terminal
from tests.helpers import cli, json_lines, response, text, tool_use

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def test_a_chat_session_streams_answers_asks_approval_inline_cancels_on_ctrl_c_and_runs_slash_commands(sqlite_url, workspace, tmp_path):
    marker = f"{30 + uuid.uuid4().int % 1000 / 1000:.3f}"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({
        "agents": {"main": [
            [response(text("Hello from the agent"))],
            [response(tool_use("tu_1", "bash", command="echo approved-output")), response(text("ran it"))],
            [response(tool_use("tu_2", "bash", command=f"sleep {marker}")), response(text("never"))],
        ]},
        "summary": ["CHAT SUMMARY"],
    }), encoding="utf-8")
    term = Terminal.chat(sqlite_url, script, workspace)
    try:
        term.wait_for("you>")  # a line editor draws the prompt; tmux drops its trailing blank
        term.type("hi")
        term.wait_for_after("Hello from the agent", "you>")  # the answer shows while it streams: type once the prompt is back

        term.type("run it")
        term.wait_for("approve? [y]es / [n]o / [a]lways / [w]hy:")
        term.type("y")
        term.wait_for_after("ran it", "you>")
        assert "approved-output" in term.screen()

        term.type("sleep please")
        term.wait_for("approve? [y]es", count=2)
        term.type("y")
        term.wait_for("⚙ bash")
        term.wait_for(f"sleep {marker}")
        deadline = time.monotonic() + 30
        while not subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True).stdout:  # it runs
            assert time.monotonic() < deadline, "the command never started"
            time.sleep(0.05)
        term.key("C-c")
        term.wait_for_after("cancelled:", "you>")
        survivors = subprocess.run(["pgrep", "-f", f"sleep {marker}"], capture_output=True, text=True)
        assert survivors.stdout.strip() == ""

        term.type("/cost")
        term.wait_for("cost: ? (4 call(s) of models with no known price")  # the scripted models have none
        term.type("/tools")
        term.wait_for("requires_approval")
        term.type("/status")
        screen = term.wait_for("turns on branch 3")
        term.type("/undo")
        term.wait_for("undid 1 turn(s)")
        term.type("/redo")
        term.wait_for("redid 1 turn(s)")
        term.type("/compact 1")
        term.wait_for("compacted 2 turn(s)")
        term.type("/bogus")
        term.wait_for("unknown command /bogus")
        term.type("/help")
        term.wait_for("/fork")
        term.type("/fork")
        forked_screen = term.wait_for("open it later with")
        term.type("/quit")
        screen = term.wait_for("EXITED=0")
    finally:
        term.close()

    assert "Traceback" not in screen
    sessions = json_lines(cli("sessions", "--json", db=sqlite_url).stdout)
    assert len(sessions) == 2
    original, fork = sessions
    assert fork["forked_from"]["session_id"] == original["session_id"] and fork["turns"] == 3
    assert "chronicle chat --session" in forked_screen and fork["session_id"][:8] in forked_screen
    log = log_of(original["session_id"], sqlite_url)
    events = [e["event"] for e in log if e["aggregate"] == "session"]
    assert {"TurnsUndone", "TurnsRedone", "Compacted"} <= set(events)
    turn_ends = [e["event"] for e in log if e["aggregate"] == "turn" and e["event"] in ("Completed", "Cancelled")]
    assert turn_ends == ["Completed", "Completed", "Cancelled"]
    approved = [e for e in log if e["aggregate"] == "tool_call" and e["event"] == "Approved"]
    assert [e["data"]["by"] for e in approved] == ["user", "user"]


def test_new_starts_a_thread_as_a_new_session_and_thread_id_switches_back_with_its_own_context(sqlite_url, workspace, tmp_path):
    script = tmp_path / "s.json"
    # the script answers by the turn's number in its session: a new thread starts at turn 1 again
    script.write_text(json.dumps({"agents": {"main": [[response(text("answer to a first turn"))], [response(text("answer to a second turn"))]]}}),
                      encoding="utf-8")
    term = Terminal.chat(sqlite_url, script, workspace)
    try:
        term.wait_for("you>")  # a line editor draws the prompt; tmux drops its trailing blank
        term.type("one")
        term.wait_for_after("answer to a first turn", "you>")
        term.type("/new")
        term.wait_for("new thread: session")
        term.type("two")
        term.wait_for("answer to a first turn", count=2)
        term.wait_for_after("answer to a first turn", "you>")
        first = json_lines(cli("sessions", "--json", db=sqlite_url).stdout)[0]["session_id"]
        term.type(f"/thread {first[:8]}")
        term.wait_for(f"switched to thread {first} (1 turn(s)")
        term.type("three")
        term.wait_for_after("answer to a second turn", "you>")
        term.type("/thread nope")
        term.wait_for("error:")
        term.type("/quit")
        screen = term.wait_for("EXITED=0")
    finally:
        term.close()
    assert "Traceback" not in screen
    sessions = json_lines(cli("sessions", "--json", db=sqlite_url).stdout)
    assert [s["turns"] for s in sessions] == [2, 1], "each thread is a session with its own turns"
    assert sessions[1]["forked_from"] is None


def test_job_jobs_and_cancel_in_chat_are_the_jobs_use_cases(sqlite_url, workspace, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [[response(text("hi"))]]}}), encoding="utf-8")
    term = Terminal.chat(sqlite_url, script, workspace)
    try:
        term.wait_for("you>")  # a line editor draws the prompt; tmux drops its trailing blank
        term.type("/job")
        term.wait_for("error: say what the job should do: /job PROMPT")
        term.type("/job tidy the notes")
        term.wait_for("queued; a `chronicle worker` runs it")
        [job] = json_lines(cli("jobs", "--json", db=sqlite_url).stdout)
        term.type("/jobs")
        term.wait_for(f"{job['job_id'][:8]}  queued")
        term.type(f"/cancel {job['job_id'][:8]}")
        term.wait_for(f"job {job['job_id']} cancelled")
        chat_session = next(s for s in json_lines(cli("sessions", "--json", db=sqlite_url).stdout) if s["session_id"] != job["job_id"])
        term.type(f"/cancel {chat_session['session_id'][:8]}")
        term.wait_for("is not a job; `chronicle jobs` lists them")
        term.type("/quit")
        screen = term.wait_for("EXITED=0")
    finally:
        term.close()
    assert "Traceback" not in screen
    [job] = json_lines(cli("jobs", "--json", db=sqlite_url).stdout)
    assert (job["origin"], job["status"], job["prompt"]) == ("chat", "cancelled", "tidy the notes")


def test_a_line_typed_while_the_turn_runs_steers_it_and_reaches_the_model_with_the_tool_results(sqlite_url, workspace, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [[
        response(text("Let me look."), tool_use("tu_1", "read_file", path="hello.txt"), delay_s=4),  # the model is slow
        response(text("Brief, as asked.")),
    ]]}}), encoding="utf-8")
    term = Terminal.chat(sqlite_url, script, workspace)
    try:
        term.wait_for("you>")
        term.type("look at hello.txt")
        term.wait_for("steer>")  # while the turn runs, the line editor takes steering
        term.type("/cost")
        term.wait_for("slash commands wait for the prompt")
        term.type("be brief")
        term.wait_for("↪ steering: be brief")
        term.wait_for_after("Brief, as asked.", "you>")
        term.type("/quit")
        screen = term.wait_for("EXITED=0")
    finally:
        term.close()
    assert "Traceback" not in screen and "guardrail" not in screen
    [session] = json_lines(cli("sessions", "--json", db=sqlite_url).stdout)
    sent = json_lines(cli("history", session["session_id"], "--at", "1", "--step", "1", "--json", db=sqlite_url).stdout)
    assert sent[-1]["role"] == "user" and sent[-1]["content"][-1] == {"type": "text", "text": "be brief"}
    assert "the user sent a steering message" in sent[-1]["content"][0]["content"]  # read_file had not started
    log = log_of(session["session_id"], sqlite_url)
    assert [e["event"] for e in log if e["event"].startswith("Steering")] == ["SteeringQueued", "SteeringDelivered"]


#: What rich's live display writes to move back over the lines it drew (erase the line, up one, erase it);
#: prompt_toolkit never writes it (it moves to its first line and erases down).
RICH_LIVE_REDRAW = "\x1b[2K\x1b[1A\x1b[2K"


def _spinner_under_the_prompt(screen: str) -> list[str]:
    """The lines from the prompt just sent to the steering line, as the screen shows them."""
    lines = [line.rstrip() for line in screen.rstrip("\n").split("\n")]
    sent = [i for i, line in enumerate(lines) if line == "you> take your time"]
    assert sent, f"the line of the prompt just sent is gone; the screen shows:\n{screen}"
    return lines[sent[-1]:]


def test_while_the_editor_reads_steering_it_draws_the_spinner_itself_and_the_prompt_just_sent_stays(sqlite_url, workspace, tmp_path):
    """The spinner and the steering editor used to draw independently (rich from its own thread, prompt_toolkit
    at its redraws), and once the spinner drew over the line of the prompt just sent. Now the editor draws
    the spinner: nothing else moves the cursor while it is open, and the screen stays as it should, seconds on."""
    gate = tmp_path / "answer-now"
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [
        [response(text("Here it is."), until_file=str(gate))],
        [response(text("Kept going."))],  # the steering came after the last step: it is the next turn's input
    ]}}), encoding="utf-8")
    raw = tmp_path / "terminal.raw"
    term = Terminal.chat(sqlite_url, script, workspace)
    try:
        term.wait_for("you>")
        term.record(raw)
        term.type("take your time")
        term.wait_for("working…")
        term.wait_for("steer>")
        frames = set()
        for _ in range(30):  # three seconds of a spinner at ten frames a second, each look a screen of its own
            shown = _spinner_under_the_prompt(term.screen())
            assert len(shown) == 3 and shown[1].endswith("working…") and shown[2] == "steer>", shown
            frames.add(shown[1])
            time.sleep(0.1)
        assert len(frames) > 1, "the spinner did not turn"
        term.type("keep going")
        term.wait_for("↪ steering: keep going")
        time.sleep(0.5)
        shown = _spinner_under_the_prompt(term.screen())
        assert shown[1] == "↪ steering: keep going" and shown[2].endswith("working…") and shown[3] == "steer>", shown
        gate.write_text("", encoding="utf-8")
        term.wait_for_after("Kept going.", "you>")
        shown = _spinner_under_the_prompt(term.screen())
        assert shown[1:3] == ["↪ steering: keep going", "Here it is."] and shown[-1] == "you>", shown
        assert "working…" not in "\n".join(shown)  # the spinner went with the turn
        term.type("/quit")
        screen = term.wait_for("EXITED=0")
    finally:
        term.close()
    assert "Traceback" not in screen
    written = raw.read_text(encoding="utf-8", errors="replace")
    assert "working…" in written and "take your time" in written  # the recording holds the turn
    assert RICH_LIVE_REDRAW not in written, "a rich live display moved the cursor while the editor owned the screen"
