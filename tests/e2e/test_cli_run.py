"""The CLI contract of the core issue, checked from outside through a real subprocess."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from tests.helpers import cli, json_lines, response, text, tool_use, write_script


def test_a_multi_step_run_records_every_tool_transition_and_a_consistent_history(db_url, workspace, tmp_path):
    script = write_script(
        tmp_path / "s.json",
        [
            response(text("Reading."), tool_use("tu_1", "read_file", path="hello.txt")),
            response(tool_use("tu_2", "write_file", path="out.txt", content="done")),
            response(text("All done.")),
        ],
    )
    run = cli("run", "do it", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    events = json_lines(run.stdout)
    assert events[-1]["type"] == "agent_end" and events[-1]["status"] == "completed"
    assert all("session_id" in e and "type" in e for e in events)
    session_id = events[0]["session_id"]
    assert (workspace / "out.txt").read_text() == "done"

    log = json_lines(cli("log", session_id, "--json", db=db_url).stdout)
    positions = [e["position"] for e in log]
    assert positions == sorted(positions)
    # read_file may run again, so its run is one event; write_file must not, so its start is committed first
    for tu, expected in (("tu_1", ["Requested", "Completed"]), ("tu_2", ["Requested", "Started", "Completed"])):
        transitions = [e["event"] for e in log if e["aggregate"] == "tool_call" and e["data"]["tool_use_id"] == tu]
        assert transitions == expected
    completed = [e for e in log if e["aggregate"] == "tool_call" and e["event"] == "Completed"]
    assert completed[0]["data"]["output"].startswith("hello world") and completed[0]["data"]["is_error"] is False

    history = json_lines(cli("history", session_id, "--json", db=db_url).stdout)
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant", "user", "assistant"]
    uses = [b["id"] for m in history for b in m["content"] if b["type"] == "tool_use"]
    results = [b["tool_use_id"] for m in history for b in m["content"] if b["type"] == "tool_result"]
    assert uses == results == ["tu_1", "tu_2"]

    sessions = json_lines(cli("sessions", "--json", db=db_url).stdout)
    assert [s["session_id"] for s in sessions] == [session_id]
    assert sessions[0]["status"] == "idle" and sessions[0]["turns"] == 1
    assert sessions[0]["cost"] is None  # the scripted model has no price
    header, row, *footnote = cli("sessions", db=db_url, env={"COLUMNS": "120"}).stdout.splitlines()
    assert row.split()[4] == "?"  # an unknown cost reads as `cost` shows it, not as a blank column
    assert " ".join(footnote).startswith("?: no USD figure")  # and is said once, under the table, as `cost` says it


def test_bash_without_yes_pauses_the_turn_with_exit_3(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(tool_use("tu_1", "bash", command="echo hi")), response(text("ok"))])
    run = cli("run", "shell please", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url)
    assert run.returncode == 3, run.stderr
    assert "approve" in run.stderr


def test_bash_with_yes_runs_and_the_model_sees_its_output(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(tool_use("tu_1", "bash", command="echo hi")), response(text("ok"))])
    run = cli("run", "shell please", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--yes", "--json", db=sqlite_url)
    assert run.returncode == 0, run.stderr
    ends = [e for e in json_lines(run.stdout) if e["type"] == "tool_end"]
    assert ends[0]["output"].startswith("hi") and "[exit code 0]" in ends[0]["output"]


def test_no_provider_and_no_key_is_a_usage_error_with_advice(sqlite_url, workspace):
    run = cli("run", "hello", "--workspace", str(workspace), db=sqlite_url)
    assert run.returncode == 2
    assert "ANTHROPIC_API_KEY" in run.stderr and "scripted:" in run.stderr


def test_demo_runs_offline_and_every_command_it_offers_works(tmp_path):
    run = cli("demo", "--dir", str(tmp_path / "a demo"))  # a space: the commands offered must quote the store's path
    assert run.returncode == 0, run.stderr
    offered = [shlex.split(line)[1:] for line in run.stdout.splitlines() if line.strip().startswith("chronicle ")]
    assert all(args[:2] == ["--db", f"sqlite:///{tmp_path / 'a demo' / 'chronicle.db'}"] for args in offered), offered
    assert {args[2] for args in offered} >= {"log", "history", "why", "sessions"}
    for args in offered:
        done = cli(*args)
        assert done.returncode == 0, (args, done.stderr)
    # The one `why` offered explains the agent's retry: it saw its first read fail, then read with the right argument.
    [why] = [args for args in offered if args[2] == "why"]
    chain = json.loads(cli(*why, "--json").stdout)
    assert chain["saw"]["last"]["content"][0]["is_error"] is True
    assert chain["tool_call"]["input"] == {"path": "app.py"} and chain["tool_call"]["status"] == "completed"


def test_demo_says_how_to_put_chronicle_on_path_when_a_shell_would_not_find_it(tmp_path):
    # `make demo` runs .venv/bin/chronicle by its path: the plain `chronicle ...` lines it offers need that directory on
    # PATH, as README's quick start exports it; said when it is missing, and only then.
    bindir = Path(sys.executable).parent
    assert (bindir / "chronicle").exists()
    without = cli("demo", "--dir", str(tmp_path / "a"), env={"PATH": "/usr/bin:/bin"})
    assert without.returncode == 0, without.stderr
    assert f'export PATH="{bindir}:$PATH"' in without.stdout
    with_it = cli("demo", "--dir", str(tmp_path / "b"), env={"PATH": f"{bindir}:/usr/bin:/bin"})
    assert with_it.returncode == 0, with_it.stderr
    assert "export PATH" not in with_it.stdout


def test_a_bad_script_file_is_a_one_line_usage_error_and_records_nothing(sqlite_url, workspace, tmp_path):
    bad = tmp_path / "bad.json"
    cases = {
        "not json": "is not valid JSON",
        '{"agents": {"main": [{"content": "hi"}]}}': "agents.main.0.content",
        '{"agent": {}}': "agents",
        '[{"content": [{"type": "text", "text": "hi"}]}]': 'a script is an object, {"agents": {"AGENT": [responses]}}',
    }
    for body, expected in cases.items():
        bad.write_text(body)
        run = cli("run", "hi", "--provider", f"scripted:{bad}", "--workspace", str(workspace), db=sqlite_url)
        assert run.returncode == 2, run.stderr
        assert expected in run.stderr and "Traceback" not in run.stderr
        assert len(run.stderr.strip().splitlines()) == 1
    for target in (tmp_path / "missing.json", tmp_path):
        run = cli("run", "hi", "--provider", f"scripted:{target}", "--workspace", str(workspace), db=sqlite_url)
        assert run.returncode == 2 and "Traceback" not in run.stderr, run.stderr
    assert cli("sessions", "--json", db=sqlite_url).stdout == ""


def test_version_and_a_demo_dir_that_is_a_file(tmp_path):
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("chronicle ")
    afile = tmp_path / "file.txt"
    afile.write_text("x")
    demo = cli("demo", "--dir", str(afile))
    assert demo.returncode == 2 and "is a file" in demo.stderr and "Traceback" not in demo.stderr


def test_errors_stay_on_one_line_however_long(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(tool_use("a", "list_dir", path="."))])
    run = cli("run", "x", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url, env={"COLUMNS": "60"})
    assert run.returncode == 1
    [line] = [ln for ln in run.stderr.splitlines() if "ran out of responses" in ln]
    assert len(line) > 60


def test_run_session_with_another_provider_is_refused_before_anything_is_recorded(db_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("first"))])
    first = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    sid = json_lines(first.stdout)[0]["session_id"]
    before = cli("log", sid, "--json", db=db_url).stdout
    switched = cli("run", "again", "--session", sid, "--provider", "anthropic", db=db_url, env={"ANTHROPIC_API_KEY": "sk-test"})
    assert switched.returncode == 2, (switched.stdout, switched.stderr)
    lines = switched.stderr.strip().splitlines()
    assert len(lines) == 1 and "runs on provider scripted" in lines[0] and "drop --provider" in lines[0]
    assert cli("log", sid, "--json", db=db_url).stdout == before
    again = write_script(tmp_path / "again.json", [response(text("second"))])
    same_kind = cli("run", "again", "--session", sid, "--provider", f"scripted:{again}", db=db_url)
    assert same_kind.returncode == 0, same_kind.stderr


def test_a_prompt_of_dash_is_read_from_stdin(sqlite_url, workspace, tmp_path):
    script = write_script(tmp_path / "s.json", [response(text("read it"))])
    piped = cli("run", "-", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url,
                input="line one\nline two\n")
    assert piped.returncode == 0, piped.stderr
    sid = json_lines(piped.stdout)[0]["session_id"]
    messages = json_lines(cli("history", sid, "--json", db=sqlite_url).stdout)
    assert messages[0]["content"][0]["text"] == "line one\nline two\n"
    empty = cli("submit", "-", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=sqlite_url, input="  \n")
    assert empty.returncode == 2 and "the prompt is empty" in empty.stderr


def test_an_in_memory_url_is_refused_with_what_to_use_instead_and_leaves_no_file(tmp_path):
    """`sqlite:///:memory:` used to create a file named ':memory:' in the working directory that
    eventsourcing then treated as an in-memory database."""
    result = cli("sessions", db="sqlite:///:memory:", cwd=tmp_path)
    assert result.returncode == 2
    assert "needs a file, not an in-memory database" in result.stderr and "sqlite:////tmp/scratch.db" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_scripted_provider_with_no_path_says_a_file_is_needed(tmp_path):
    """`--provider scripted:` was resolved to the current directory first: "cannot read script DIR: Is a directory"."""
    refused = cli("run", "hi", "--provider", "scripted:", "--db", f"sqlite:///{tmp_path / 'x.db'}", cwd=tmp_path)
    assert refused.returncode == 2 and "the scripted provider needs a file: --provider scripted:PATH" in refused.stderr, refused.stderr
    assert not (tmp_path / "x.db").exists()
