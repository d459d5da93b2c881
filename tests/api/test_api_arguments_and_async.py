"""The public API refuses what the CLI refuses, says when a resume would only find a pause, and
offers every blocking call to async programs as a coroutine, on both backends."""

from __future__ import annotations

import asyncio
import json
import uuid
import warnings

import pytest

from chronicle import Agent, Chronicle, ChronicleError
from tests.helpers import recorded_sessions, response, text, tool_use


def scripted(tmp_path, turns, name="s.json"):
    path = tmp_path / name
    path.write_text(json.dumps({"agents": {"main": turns}}), encoding="utf-8")
    return f"scripted:{path}"


def two_bash_calls(tmp_path):
    return scripted(tmp_path, [[response(tool_use("tu_1", "bash", command="echo one"), tool_use("tu_2", "bash", command="echo two")),
                                response(text("ran both"))]])


@pytest.mark.parametrize("call, named", [
    (lambda app, sid, agent: app.history(sid, at=0), "at: input should be greater than or equal to 1, got 0"),
    (lambda app, sid, agent: app.history(sid, at="x"), "at:"),
    (lambda app, sid, agent: app.history(sid, at=1, step=-1), "step:"),
    (lambda app, sid, agent: app.undo(sid, turns=0), "turns:"),
    (lambda app, sid, agent: app.fork(sid, at=-1), "at:"),
    (lambda app, sid, agent: app.audit(limit=0), "limit:"),
    (lambda app, sid, agent: app.compact(sid, keep=-1), "keep:"),
    (lambda app, sid, agent: app.cancel(sid, wait_s=float("inf")), "wait_s:"),
    (lambda app, sid, agent: app.log(42), "log(): session: expected a session id (str or UUID), got 42"),
    (lambda app, sid, agent: app.run_sync(agent, None), "prompt:"),
    (lambda app, sid, agent: app.run_sync(agent, "again", session=sid, max_iterations=0), "max_iterations:"),
    (lambda app, sid, agent: app.run_sync("main", "hi"), "agent:"),
    (lambda app, sid, agent: app.submit_job(agent, "later", max_iterations=-1), "max_iterations:"),
])
def test_an_argument_the_cli_would_refuse_is_a_chronicle_error_2_and_records_nothing(db_url, workspace, tmp_path, call, named):
    agent = Agent(tools=[], provider=scripted(tmp_path, [[response(text("hello"))]] * 3))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "hi", workspace=workspace).session_id
        before = app.log(sid)
        with pytest.raises(ChronicleError) as refused:
            call(app, sid, agent)
        assert refused.value.code == 2
        assert named in str(refused.value) and "\n" not in str(refused.value)
        assert app.log(sid) == before
        assert [s["session_id"] for s in app.sessions()] == [sid]


#: Values pydantic would coerce, which the CLI's parser and the server's strict bodies never pass on: a program
#: passing "yes" or "5" by mistake is told so, rather than `always="yes"` becoming a standing always-allow.
@pytest.mark.parametrize("call, named", [
    (lambda app, sid, agent: app.approve(sid, always="yes"), "approve(): always: input should be a valid boolean, got 'yes'"),
    (lambda app, sid, agent: app.approve(sid, always=1), "always: input should be a valid boolean, got 1"),
    (lambda app, sid, agent: app.log(sid, tree="yes"), "log(): tree:"),
    (lambda app, sid, agent: app.sessions(all="true"), "sessions(): all:"),
    (lambda app, sid, agent: app.audit(errors="no"), "audit(): errors:"),
    (lambda app, sid, agent: app.steer(sid, "go on", wait_batch="yes"), "steer(): wait_batch:"),
    (lambda app, sid, agent: app.undo(sid, turns="1"), "undo(): turns: input should be a valid integer, got '1'"),
    (lambda app, sid, agent: app.undo(sid, files="no"), "undo(): files:"),
    (lambda app, sid, agent: app.redo(sid, files=0), "redo(): files:"),
    (lambda app, sid, agent: app.history(sid, at=True), "history(): at: input should be a valid integer, got True"),
    (lambda app, sid, agent: app.history(sid, at="1"), "history(): at:"),
    (lambda app, sid, agent: app.history(sid, version=1.0), "history(): version:"),
    (lambda app, sid, agent: app.fork(sid, at="1"), "fork(): at:"),
    (lambda app, sid, agent: app.why(sid, turn="1"), "why(): turn:"),
    (lambda app, sid, agent: app.audit(limit="5"), "audit(): limit:"),
    (lambda app, sid, agent: app.compact(sid, strategy="truncate", keep="0"), "compact(): keep:"),
    (lambda app, sid, agent: app.set_model(sid, "claude-sonnet-4-5", thinking_tokens="0"), "set_model(): thinking_tokens:"),
    (lambda app, sid, agent: app.cancel(sid, wait_s="5"), "cancel(): wait_s: input should be a valid number, got '5'"),
    (lambda app, sid, agent: app.cancel(sid, wait_s=True), "cancel(): wait_s:"),
    (lambda app, sid, agent: app.run_sync(agent, "again", session=sid, auto_approve="yes"), "run(): auto_approve:"),
    (lambda app, sid, agent: app.run_sync(agent, "again", session=sid, max_iterations="5"), "run(): max_iterations:"),
    (lambda app, sid, agent: app.resume(sid, auto_approve=1), "resume(): auto_approve:"),
    (lambda app, sid, agent: app.submit_job(agent, "later", max_iterations=5.0), "submit_job(): max_iterations:"),
])
def test_a_value_of_another_type_is_not_coerced_but_a_chronicle_error_2_naming_the_argument(db_url, workspace, tmp_path,
                                                                                            call, named):
    test_an_argument_the_cli_would_refuse_is_a_chronicle_error_2_and_records_nothing(db_url, workspace, tmp_path, call, named)


def test_an_int_is_taken_where_a_float_is_asked_and_a_bool_where_a_bool_is(db_url, workspace, tmp_path):
    agent = Agent(tools=[], provider=scripted(tmp_path, [[response(text("hello"))]]))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "hi", workspace=workspace, auto_approve=True).session_id
        assert app.cancel(sid, wait_s=0)["session_id"] == sid  # idle: nothing to cancel, and no argument error
        assert app.cancel(sid, wait_s=2.5)["session_id"] == sid
        assert app.log(sid, tree=True) and app.sessions(all=False)


def test_a_session_may_be_named_by_its_uuid_object(db_url, workspace, tmp_path):
    agent = Agent(tools=[], provider=scripted(tmp_path, [[response(text("hello"))], [response(text("again"))]]))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "hi", workspace=workspace).session_id
        assert app.history(uuid.UUID(sid)) == app.history(sid)
        assert app.run_sync(agent, "more", session=uuid.UUID(sid)).text == "again"


def test_resume_reports_a_pause_until_every_call_is_decided(db_url, workspace, tmp_path):
    with Chronicle(db_url) as app:
        paused = app.run_sync(Agent(tools=["bash"], provider=two_bash_calls(tmp_path)), "run both", workspace=workspace)
        assert (paused.status, paused.exit_code) == ("awaiting_approval", 3)
        waiting = app.resume(paused.session_id)
        assert (waiting.status, waiting.exit_code) == ("awaiting_approval", 3) and "bash" in waiting.reason
        app.approve(paused.session_id, tool_call="tu_1")
        still = app.resume(paused.session_id)
        assert (still.status, still.exit_code) == ("awaiting_approval", 3)
        assert [e["event"] for e in app.log(paused.session_id)].count("Completed") == 0  # nothing ran meanwhile
        app.approve(paused.session_id, tool_call="tu_2")
        done = app.resume(paused.session_id)
        assert (done.status, done.text, done.exit_code) == ("completed", "ran both", 0)
        idle = app.resume(paused.session_id)
        assert (idle.status, idle.exit_code) == ("idle", 0) and "no turn in flight" in idle.reason


def test_async_programs_await_the_twins_and_the_blocking_calls_say_so(db_url, workspace, tmp_path):
    app = Chronicle(db_url)
    agent = Agent(tools=["bash"], provider=two_bash_calls(tmp_path))

    async def program():
        paused = await app.run(agent, "run both", workspace=workspace)
        for blocking_call in (lambda: app.resume(paused.session_id), lambda: app.replay(paused.session_id),
                              lambda: app.compact(paused.session_id), lambda: app.run_sync(agent, "hi")):
            with pytest.raises(ChronicleError) as told:
                blocking_call()
            assert told.value.code == 2 and "await" in str(told.value)
        app.approve(paused.session_id)
        done = await app.resume_async(paused.session_id)
        compacted = await app.compact_async(paused.session_id, strategy="truncate", keep=0)
        replayed = await app.replay_async(paused.session_id)
        return done, compacted, replayed

    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no coroutine left never awaited
        done, compacted, replayed = asyncio.run(program())
    assert (done.status, done.text) == ("completed", "ran both")
    assert compacted["session_id"] == done.session_id
    assert replayed["identical"] is True
    app.close()


def test_archived_sessions_are_listed_with_all(db_url, workspace, tmp_path):
    agent = Agent(tools=[], provider=scripted(tmp_path, [[response(text("hello"))]] * 2))
    with Chronicle(db_url) as app:
        kept = app.run_sync(agent, "one", workspace=workspace).session_id
        hidden = app.run_sync(agent, "two", workspace=workspace).session_id
        assert app.archive(hidden) == {"session_id": hidden, "archived": True}
        assert [s["session_id"] for s in app.sessions()] == [kept]
        listed = {s["session_id"]: s["archived"] for s in app.sessions(all=True)}
        assert listed == {kept: False, hidden: True}
        assert app.unarchive(hidden[:8]) == {"session_id": hidden, "archived": False}
        assert len(app.sessions()) == 2


def test_a_lone_name_where_a_list_belongs_is_refused_before_anything_is_recorded(db_url, workspace, tmp_path):
    with pytest.raises(ValueError, match=r"tools takes a list, like tools=\['read_file'\]"):
        Agent(tools="read_file")
    (workspace / "chart.png").write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 16)
    agent = Agent(tools=[], provider=scripted(tmp_path, [[response(text("hello"))]]))
    with Chronicle(db_url) as app:
        with pytest.raises(ChronicleError) as refused:
            app.run_sync(agent, "look", workspace=workspace, attachments=str(workspace / "chart.png"))
        assert refused.value.code == 2 and "attachments take a list" in str(refused.value)
        assert recorded_sessions(app) == []


SCRIPT = '''
import sys
from chronicle import Agent, Chronicle, ChronicleError, tool


@tool(read_only=True)
def ping(msg: str) -> str:
    """Ping back."""
    return "pong " + msg


app = Chronicle(sys.argv[1])
agent = Agent(tools=[ping], provider=sys.argv[2])
for submit in (lambda: app.submit(agent, "do it", workspace=sys.argv[3]), lambda: app.submit_job(agent, "do it", workspace=sys.argv[3])):
    try:
        submit()
        print("accepted")
    except ChronicleError as exc:
        print(exc.code, exc)
print(app.run_sync(agent, "here", workspace=sys.argv[3]).status)
'''


def test_work_for_a_worker_needing_code_only_the_running_script_defines_is_refused(db_url, workspace, tmp_path):
    import subprocess
    import sys

    script = tmp_path / "defines_a_tool.py"
    script.write_text(SCRIPT, encoding="utf-8")
    provider = scripted(tmp_path, [[response(text("pong"))]])
    out = subprocess.run([sys.executable, str(script), db_url, provider, str(workspace)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    refusal = "2 ping defined in the script being run (__main__), which a worker cannot import: move it into a module"
    assert [line[:len(refusal)] for line in lines[:2]] == [refusal, refusal]
    assert lines[2] == "completed", "the same agent still runs in the process that defines it"
    with Chronicle(db_url) as app:
        assert len(app.sessions()) == 1 and app.jobs() == []
