"""`chronicle tasks add` and a delegate task item's task_id through the real CLI and the library: a task
added to a session's board, claimed by the child a later delegation starts, the same facts from
`Chronicle`, one-line errors with the usual exit codes, and a parent killed mid-delegation whose
resume settles the claimed task without claiming it again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from uuid import UUID

import pytest

from chronicle import Chronicle, ChronicleError
from chronicle.domain.ids import turn_id
from chronicle.runtime.agents.children import TASK_INPUT_ID
from chronicle.runtime.store import ChronicleStore, NotFound
from chronicle.runtime.task_board import get_task
from tests import processes
from tests.e2e.test_cli_subagents import REGISTRY, complete
from tests.e2e.test_cli_subagents_crash import wait_for
from tests.helpers import cli, json_lines, response, text, tool_use, write_script


def first_turn(tmp_path, workspace, db_url) -> str:
    (workspace / "chronicle.toml").write_text(REGISTRY, encoding="utf-8")
    script = write_script(tmp_path / "script.json", [response(text("ready"))])
    run = cli("run", "hello", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    return json_lines(run.stdout)[0]["session_id"]


def claim(id_: str, agent: str, task: str, task_id: str) -> dict:
    return tool_use(id_, "delegate", tasks=[{"agent": agent, "task": task, "context": "", "task_id": task_id}])


def test_a_task_added_with_the_cli_is_listed_pending_then_claimed_by_a_delegated_child(db_url, workspace, tmp_path):
    sid = first_turn(tmp_path, workspace, db_url)
    added = cli("tasks", "add", sid, "count the widgets", "--agent", "researcher", db=db_url)
    assert added.returncode == 0, added.stderr
    tid = added.stdout.strip()
    as_json = cli("tasks", "add", sid, "anything at all", "--json", db=db_url)
    assert as_json.returncode == 0, as_json.stderr
    [open_row] = json_lines(as_json.stdout)
    assert open_row == {**open_row, "status": "pending", "agent": None, "child_session_id": None, "task": "anything at all"}

    listed = json_lines(cli("tasks", sid[:8], "--json", db=db_url).stdout)
    assert [(r["task_id"], r["status"], r["child_session_id"]) for r in listed] == [
        (tid, "pending", None), (open_row["task_id"], "pending", None)]
    assert {"task_id", "agent", "status", "summary", "child_session_id"} <= set(listed[0])
    table = cli("tasks", sid, db=db_url).stdout
    assert tid[:8] in table and "(any)" in table and "count the widgets" in table

    with Chronicle(db_url) as chronicle:
        assert chronicle.tasks(sid) == listed
        from_code = chronicle.add_task(sid, "a third one", agent="auditor")
        assert from_code == {**from_code, "agent": "auditor", "status": "pending", "child_session_id": None}
        with pytest.raises(ChronicleError) as unknown:
            chronicle.add_task("ffffffff", "x")
        assert unknown.value.code == 2

    script = write_script(tmp_path / "script.json",
                          [response(claim("d1", "researcher", "count the widgets", tid)), response(text("done"))],
                          researcher=[response(complete("r1", "42 widgets"))])
    run = cli("run", "go", "--session", sid, "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert run.returncode == 0, run.stderr
    events = json_lines(run.stdout)
    child = next(e["session_id"] for e in events if e["type"] == "agent_start" and e.get("parent_session_id"))
    result = json.loads(next(e for e in events if e["type"] == "tool_end" and e["name"] == "delegate")["output"])["results"][0]
    assert result == {**result, "task_id": tid, "session_id": child, "status": "completed"}

    rows = {r["task_id"]: r for r in json_lines(cli("tasks", sid, "--json", db=db_url).stdout)}
    assert rows[tid] == {**rows[tid], "status": "completed", "summary": "42 widgets", "child_session_id": child, "agent": "researcher"}
    assert len(rows) == 3, "the claimed task is listed once, with no auto-opened twin"
    audit = json_lines(cli("audit", "--session", sid, "--json", db=db_url).stdout)
    assert [(e["status"], e["links"].get("child_session_id")) for e in audit if e["kind"] == "task" and e["detail"]["task_id"] == tid] == [
        ("pending", None), ("in_progress", child), ("completed", child)]


def test_tasks_add_errors_are_one_line_with_the_usual_exit_codes_and_record_nothing(sqlite_url, workspace, tmp_path):
    sid = first_turn(tmp_path, workspace, sqlite_url)
    missing = cli("tasks", "add", "ffffffff", "x", db=sqlite_url)
    assert missing.returncode == 2 and "no session matches" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    empty = cli("tasks", "add", sid, "  ", db=sqlite_url)
    assert empty.returncode == 2 and "the task is empty" in empty.stderr and len(empty.stderr.strip().splitlines()) == 1
    stranger = cli("tasks", "add", sid, "x", "--agent", "ghost", db=sqlite_url)
    assert stranger.returncode == 2 and "'ghost'" in stranger.stderr and "researcher" in stranger.stderr
    assert len(stranger.stderr.strip().splitlines()) == 1
    assert cli("tasks", sid, "--json", db=sqlite_url).stdout == ""
    bare = cli("tasks", db=sqlite_url)  # the usage shown is the one the user typed, not the hidden `tasks list`'s
    assert bare.returncode == 2 and bare.stderr.strip().splitlines() == [
        "error: missing argument 'SESSION'; see `chronicle tasks --help`"]
    helped = cli("tasks", "--help", db=sqlite_url)
    assert helped.returncode == 0 and "add" in helped.stdout


def test_a_session_that_cannot_delegate_takes_no_board_task(sqlite_url, workspace, tmp_path):
    """Only a delegate call claims a board task: on a session with no sub-agents (or a sub-agent at its depth limit)
    one stayed `pending (any)` for good, and `--agent` there was refused with "its agents: none (or leave --agent
    out to let any of them claim the task)"."""
    script = write_script(tmp_path / "script.json", [response(text("ready"))])
    run = cli("run", "hello", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=sqlite_url)
    sid = json_lines(run.stdout)[0]["session_id"]
    for extra in ((), ("--agent", "researcher")):
        refused = cli("tasks", "add", sid, "count the widgets", *extra, db=sqlite_url)
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert "cannot delegate (it has no sub-agents), so no agent would ever claim a task on its board" in refused.stderr
    assert cli("tasks", sid, "--json", db=sqlite_url).stdout == ""
    with Chronicle(sqlite_url) as app, pytest.raises(ChronicleError, match="it has no sub-agents") as error:
        app.add_task(sid, "count the widgets")
    assert error.value.code == 2


def test_tasks_help_shows_the_listing_s_session_and_options_and_the_listing_still_parses(sqlite_url, workspace, tmp_path):
    """The listing is a hidden `tasks list` command: `tasks --help` showed only `add`, none of SESSION, --json or --db.
    `tasks SESSION --help` is that same help, not the hidden command's."""
    sid = first_turn(tmp_path, workspace, sqlite_url)
    helped = cli("tasks", "--help")
    assert helped.returncode == 0, helped.stderr
    arguments, _, rest = helped.stdout.partition("Arguments")[2].partition("Options")
    options, _, commands = rest.partition("Commands")
    assert "session" in arguments and "The delegating session" in arguments
    assert "--json" in options and "--db" in options and "--help" in options
    assert "add" in commands and "tasks list" not in helped.stdout
    assert helped.stdout.count("SESSION [--json]") == 1  # the usage line is the group's, SESSION not said twice
    for asked in (("tasks", sid, "--help"), ("tasks", sid, "--json", "-h")):
        again = cli(*asked, db=sqlite_url)
        assert again.returncode == 0 and again.stdout == helped.stdout, again.stderr
    added = cli("tasks", "add", sid, "look it up", "--json", db=sqlite_url)
    assert added.returncode == 0, added.stderr
    task_id = json_lines(added.stdout)[0]["task_id"]
    assert [row["task_id"] for row in json_lines(cli("tasks", sid, "--json", db=sqlite_url).stdout)] == [task_id]
    table = cli("tasks", sid, db=sqlite_url)
    assert table.returncode == 0 and task_id[:8] in table.stdout and "look it up" in table.stdout


def test_a_parent_killed_while_its_child_works_a_claimed_task_resumes_without_claiming_it_again(db_url, workspace, tmp_path):
    sid = first_turn(tmp_path, workspace, db_url)
    tid = cli("tasks", "add", sid, "read hello.txt", "--agent", "researcher", db=db_url).stdout.strip()

    path = tmp_path / "script.json"  # the session's provider, as its first turn recorded it

    def write(slow_s: float) -> None:
        write_script(path, [response(claim("d1", "researcher", "read hello.txt", tid)), response(text("reported"))],
                     researcher=[response(tool_use("r1", "read_file", path="hello.txt")),
                                 response(complete("r2", "it says hello world"), delay_s=slow_s)])

    write(60)
    env = {k: v for k, v in os.environ.items() if k not in ("ANTHROPIC_API_KEY",)}
    env["CHRONICLE_DB"] = db_url
    proc = processes.start(
        [sys.executable, "-m", "chronicle.runtime.cli", "run", "go", "--session", sid, "--provider", f"scripted:{path}",
         "--workspace", str(workspace), "--json"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    store = ChronicleStore(db_url)
    try:
        def working():
            task = get_task(store, UUID(tid))
            if task is None or task.status != "in_progress":
                return None
            try:
                turn = store.turn(turn_id(task.child_session_id, TASK_INPUT_ID))
            except NotFound:
                return None
            return task if turn.steps and turn.steps[0]["results"] else None

        claimed = wait_for(working, "the researcher's claim, and its child mid-way through its task")
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
    write(0)
    resumed = cli("resume", sid, "--json", db=db_url)
    assert resumed.returncode == 0, resumed.stderr
    [row] = [r for r in json_lines(cli("tasks", sid, "--json", db=db_url).stdout) if r["task_id"] == tid]
    assert row == {**row, "status": "completed", "summary": "it says hello world", "child_session_id": str(claimed.child_session_id)}
    audit = json_lines(cli("audit", "--session", sid, "--json", db=db_url).stdout)
    assert [e["status"] for e in audit if e["kind"] == "task" and e["detail"]["task_id"] == tid] == ["pending", "in_progress", "completed"]
    children = [s for s in store.session_ids() if store.session(s).parent_session_id is not None]
    assert children == [claimed.child_session_id], "the resumed parent continued its child instead of starting another"
