"""A routine fired by hand whose session could not run here (no model provider, a script that is not there) is
refused before anything is recorded, as `run` refuses such a session: recorded, its input waited for good and
every `resume --all` failed on it. A lightweight routine whose session exists runs with the provider that session
recorded, as before. `resume --all` goes on past a session it cannot set up (README), saying which."""

from __future__ import annotations

import json
from uuid import UUID

from chronicle.domain.agent_spec import AgentSpec
from chronicle.runtime.sessions import start_session
from chronicle.runtime.store import ChronicleStore
from tests.closed_at_end import closed_at_end
from tests.helpers import cli, json_lines, response, text

TODO = '[routines.todo_check]\ntrigger = "manual"\nprompt = "Check TODO.md."\n'


def one_line(run) -> str:
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in run.stderr, run.stderr
    return lines[0]


def test_a_manual_routine_with_no_provider_is_refused_and_records_nothing(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text(TODO, encoding="utf-8")
    bare = cli("routines", "run", "todo_check", "--workspace", str(workspace), db=db_url)
    assert bare.returncode == 2, (bare.stdout, bare.stderr)
    assert one_line(bare).startswith("error: routine todo_check: nothing recorded, its session could not run: no model "
                                     "provider: set ANTHROPIC_API_KEY")
    missing = cli("routines", "run", "todo_check", "--provider", f"scripted:{tmp_path / 'none.json'}", "--workspace",
                  str(workspace), db=db_url)
    assert missing.returncode == 2 and "script file not found" in one_line(missing), missing.stderr
    history = cli("routines", "history", "--workspace", str(workspace), "--json", db=db_url)
    assert json_lines(history.stdout) == []
    assert closed_at_end(ChronicleStore(db_url)).session_ids() == []
    nothing = cli("resume", "--all", db=db_url)
    assert nothing.returncode == 0 and "nothing to resume" in nothing.stdout, nothing.stderr
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"routine-todo_check": [[response(text("one"))], [response(text("two"))]]}}),
                      encoding="utf-8")
    first = cli("routines", "run", "todo_check", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json",
                db=db_url)
    assert first.returncode == 0 and json_lines(first.stdout)[0]["summary"] == "one", first.stderr
    again = cli("routines", "run", "todo_check", "--workspace", str(workspace), "--json", db=db_url)  # its session's provider
    assert again.returncode == 0 and json_lines(again.stdout)[0]["summary"] == "two", again.stderr


def test_resume_all_goes_on_past_a_session_it_cannot_set_up_and_exits_2(db_url, workspace, tmp_path):
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [[response(text("fine"))]]}}), encoding="utf-8")
    store = closed_at_end(ChronicleStore(db_url))
    stuck, _ = start_session(store, AgentSpec(name="main", provider="", model="m", workspace=str(workspace)), "stuck")
    good = cli("submit", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert good.returncode == 0, good.stderr
    resumed = cli("resume", "--all", db=db_url)
    assert resumed.returncode == 2, (resumed.stdout, resumed.stderr)
    assert "fine" in resumed.stdout
    assert [line for line in resumed.stderr.splitlines() if line.startswith("error:")] == [
        f"error: session {stuck.id} has no recorded provider; pass --provider anthropic or scripted:PATH"]
    fresh = closed_at_end(ChronicleStore(db_url))
    assert fresh.session(UUID(good.stdout.split()[-1])).status == "idle" and fresh.session(stuck.id).queue
