"""Bad input a program plausibly gives the public API is a `ChronicleError` with the CLI's exit code and one line
naming what is wrong, and records nothing: never a raw ValueError, TypeError, AttributeError, pydantic or
eventsourcing error from inside. Definitions (an Agent, a @tool, the server's settings) stay the ValueError or
TypeError they raised before, as well, so a program catching those still does. The last test drives many inputs
through every public method with hypothesis."""

from __future__ import annotations

import base64
import functools
import json
import os
import shlex
import socket
import uuid
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from chronicle import Agent, Chronicle, ChronicleError, Guardrail, McpServer, Middleware, Routine, Stop, Timeout, tool
from tests import store_leaks
from tests.helpers import cli, recorded_sessions, response, text
from tests.tamper import Tamper


def scripted(tmp_path: Path, turns: int = 40) -> str:
    path = tmp_path / "script.json"
    path.write_text(json.dumps({"agents": {"main": [[response(text("hello"))]] * turns}}), encoding="utf-8")
    return f"scripted:{path}"


def refused(call, code: int = 2) -> ChronicleError:
    with pytest.raises(ChronicleError) as raised:
        call()
    assert raised.value.code == code, raised.value
    assert str(raised.value) and "\n" not in str(raised.value)
    return raised.value


@tool
def twin(x: int) -> str:
    """A tool."""
    return str(x)


def _plain(x: int) -> str:
    return str(x)


def _unschemable(sock: socket.socket) -> str:
    return ""


# -- definitions ---------------------------------------------------------------------------------


@pytest.mark.parametrize("fields, named, kind", [
    ({"name": 5}, "agent name 5", TypeError),
    ({"instructions": 5}, "instructions takes text", TypeError),
    ({"description": ["x"]}, "description takes text", TypeError),
    ({"provider": 5}, "provider takes a name", TypeError),
    ({"model": "   "}, "model takes a name", TypeError),
    ({"tools": ["nope"]}, "unknown tool 'nope'", ValueError),
    ({"tools": [5]}, "tools= takes @tool functions", TypeError),
    ({"tools": [_plain]}, "a function not decorated with @tool", TypeError),
    ({"approvals": {"policy": "bogus"}}, "approvals.policy", ValueError),
    ({"max_iterations": 0}, "max_iterations must be at least 1", ValueError),
])
def test_an_agent_that_cannot_work_is_a_chronicle_error_2_and_still_the_error_it_was(fields, named, kind):
    error = refused(lambda: Agent(**fields))
    assert named in str(error)
    assert isinstance(error, kind)  # what Agent raised before: a program catching it still does


@pytest.mark.parametrize("make, named", [
    (lambda: tool(5), "@tool decorates a function, not int"),
    (lambda: tool(name=5)(_plain), "@tool(name=...) takes text, got int"),
    (lambda: tool(timeout_s="5")(_plain), "timeout_s must be positive seconds, got '5'"),
    (lambda: tool(timeout_s=float("nan"))(_plain), "timeout_s must be positive seconds, got nan"),
    (lambda: tool(read_only="yes")(_plain), "@tool(read_only=...) takes True or False, got 'yes'"),
    (lambda: tool(name="two words")(_plain), "tool name 'two words'"),
    (lambda: tool(_unschemable), "tool _unschemable: a parameter's type cannot be described to the model as JSON"),
])
def test_a_tool_definition_that_cannot_work_is_a_chronicle_error_2(make, named):
    error = refused(make)
    assert named in str(error) and "arbitrary_types_allowed" not in str(error)
    assert isinstance(error, (ValueError, TypeError))


def _check(text, where):
    return None


async def _around(run, call_next):
    return await call_next(run)


@pytest.mark.parametrize("make, named", [
    (lambda: Guardrail("g", _check, on=["bogus"]), "guardrail g: on must list some of inbound, tool_result, final"),
    (lambda: Guardrail("g", _check, on="final"), "guardrail g: on takes a list, like on=['final']"),
    # found by the hypothesis run below: places of mixed types could not be sorted into the message (a TypeError)
    (lambda: Guardrail("g", _check, on=["", 0]), "guardrail g: on must list some of inbound, tool_result, final (got ['', 0])"),
    (lambda: Guardrail("g", _check, on=5), "guardrail g: on takes a list of places"),
    (lambda: Guardrail("g", _check, on=[["final"]]), "guardrail g: on takes a list of places"),
    (lambda: Guardrail("g", _check, fail="maybe"), "guardrail g: fail must be closed or open"),
    (lambda: Guardrail("g", 5), "guardrail g: check must be a function or an import path, not int"),
    (lambda: Guardrail(5, _check), "guardrail 5: name takes text"),
    (lambda: Timeout(seconds=-1), "Timeout: seconds must be a positive number (got -1)"),
    (lambda: Timeout(seconds=float("nan")), "Timeout: seconds must be a positive number (got nan)"),
    (lambda: Timeout(seconds=True), "Timeout: seconds must be a positive number (got True)"),
    (lambda: Stop(), "Stop needs a reason"),
    (lambda: Middleware(5, _around), "Middleware 5: name takes text"),
    (lambda: Middleware(" ", _around), "Middleware ' ': name takes text"),
    (lambda: Middleware("m", 5), "middleware m: use takes a function, a class or an import path, not int"),
    (lambda: McpServer(name="files"), "McpServer 'files': give either command (a stdio server) or url"),
    (lambda: McpServer(name="files", command=5), "McpServer 'files'.command: Input should be a valid string"),
    (lambda: McpServer(name="files", url="ftp://x"), "url must start with http:// or https://"),
    (lambda: McpServer(name="files", command="x", startup_timeout_s=0), "McpServer 'files'.startup_timeout_s:"),
])
def test_a_guardrail_middleware_stop_or_mcp_server_that_cannot_work_is_a_chronicle_error_2(make, named):
    error = refused(make)
    assert named in str(error)
    assert isinstance(error, (ValueError, TypeError))


def test_a_store_url_that_is_no_text_is_a_chronicle_error_2(tmp_path):
    error = refused(lambda: Chronicle(tmp_path / "c.db"))  # a Path: which kind of store is the URL's to say
    assert "url: expected a database URL (str)" in str(error)


# -- sessions started from an Agent whose parts cannot work: refused before anything is recorded --------------


@pytest.mark.parametrize("parts, named", [
    ({"agents": [5]}, "agents= takes Agent objects, not int"),
    ({"agents": [Agent(name="helper"), Agent(name="helper")]}, "two sub-agents are named 'helper'"),
    ({"agents": [Agent(name="Main", instructions="another")]}, "a sub-agent is named 'Main', as the top-level agent is"),
    ({"agents": [Agent(name="helper", provider="openai-compatible")]}, "sub-agents run on their parent's provider"),
])
def test_sub_agents_that_cannot_work_are_refused_where_the_agent_is_written(parts, named):
    """They were refused only by the first run or submit, though the Agent's other fields are checked where written."""
    error = refused(lambda: Agent(tools=[], **parts))
    assert named in str(error) and isinstance(error, ValueError)


@pytest.mark.parametrize("parts, named", [
    ({"agents": [Agent(name="helper", doom_loop=2)]}, "doom_loop is set on the top-level agent"),
    ({"mcp_servers": ["nope"]}, "no [mcp.nope]"),
    ({"mcp_servers": [5]}, "mcp_servers= takes McpServer objects"),
])
def test_an_agent_whose_parts_cannot_work_is_refused_by_every_call_that_starts_a_session(db_url, workspace, tmp_path, parts, named):
    agent = Agent(tools=[], provider=scripted(tmp_path), **parts)
    with Chronicle(db_url) as app:
        for call in (lambda: app.run_sync(agent, "hi", workspace=workspace),
                     lambda: app.submit(agent, "hi", workspace=workspace),
                     lambda: app.submit_job(agent, "hi", workspace=workspace)):
            assert named in str(refused(call))
        assert recorded_sessions(app) == []  # on SQLite not even a store: each is refused before one is made


def test_a_blank_model_for_a_new_session_is_refused_as_the_cli_refuses_it(db_url, workspace, tmp_path):
    provider = scripted(tmp_path)
    with Chronicle(db_url) as app:
        error = refused(lambda: app.run_sync(Agent(tools=[], provider=provider), "hi", workspace=workspace, model="  "))
        assert recorded_sessions(app) == []
    done = cli("run", "hi", "--provider", provider, "--model", "  ", "--workspace", str(workspace), db=db_url)
    assert done.returncode == 2 and " ".join(f"error: {error}".split()) in " ".join(done.stderr.split())
    with Chronicle(db_url) as app:
        assert recorded_sessions(app) == []


def test_an_event_that_does_not_decode_is_a_chronicle_error_1_with_the_cli_words(db_url, workspace, tmp_path):
    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=[], provider=scripted(tmp_path)), "hi", workspace=workspace).session_id
    tamper = Tamper(db_url)
    for position in tamper.positions():
        oid, _, topic, _ = tamper.event(position)
        if str(oid) == sid and topic.endswith("Session.InputQueued"):
            tamper.set_state(position, b"not json")
    with Chronicle(db_url) as app:
        error = refused(lambda: app.history(sid), code=1)
    assert "cannot be decoded" in str(error)
    done = cli("history", sid, "--json", db=db_url)
    assert done.returncode == 1 and " ".join(f"error: {error}".split()) in " ".join(done.stderr.split())


def test_a_uuid_naming_no_session_is_the_usage_error_its_text_is(db_url, workspace, tmp_path):
    unknown = uuid.uuid4()
    with Chronicle(db_url) as app:
        app.run_sync(Agent(tools=[], provider=scripted(tmp_path)), "hi", workspace=workspace)
        before = app.store.max_position()
        for call in (app.fork, app.history, app.log, app.undo, app.archive, app.model, app.resume):
            as_object, as_text = refused(functools.partial(call, unknown)), refused(functools.partial(call, str(unknown)))
            # The hint names the library's store: a plain `chronicle sessions` would list another (runtime/pasteable.py).
            listing = f"chronicle --db {shlex.quote(app.url)} sessions"
            assert str(as_object) == str(as_text) == f"no session {unknown}; `{listing}` lists them"
        assert app.store.max_position() == before


def test_replay_in_a_workspace_that_is_not_a_directory_is_refused_as_the_cli_refuses_it(db_url, workspace, tmp_path):
    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=[], provider=scripted(tmp_path)), "hi", workspace=workspace).session_id
        error = refused(lambda: app.replay(sid, workspace=tmp_path / "gone"))
    assert str(error) == f"--workspace {tmp_path / 'gone'} is not a directory; pass the directory the session's files are in"
    done = cli("replay", sid, "--workspace", str(tmp_path / "gone"), db=db_url)
    assert done.returncode == 2 and " ".join(f"error: {error}".split()) in " ".join(done.stderr.split())


def test_a_routine_made_in_code_with_a_name_that_is_no_text_is_a_chronicle_error_2(sqlite_url, workspace):
    with Chronicle(sqlite_url) as app:
        error = refused(lambda: app.routines(workspace=workspace, routines=[Routine(name=5, trigger="manual", prompt="x")]))
    assert "routine names start with a letter" in str(error)


# -- the server's app ------------------------------------------------------------------------------


@pytest.mark.parametrize("agents, options, named", [
    ((), {"token": "   "}, "token: blank"),
    ((), {"token": 5}, "token: takes text, got int"),
    ((), {"run_worker": "no"}, "run_worker: takes True or False, got 'no'"),
    ((), {"workspace": 5}, "workspace: expected a directory"),
    (("main",), {}, "agents: expected Agent objects, got str"),
    ((Agent(name="a"), Agent(name="a")), {}, "agents: two are named 'a'"),
    ((Agent(name="a", agents=[Agent(name="b", doom_loop=1)]),), {}, "agent b: doom_loop is set on the top-level agent"),
])
def test_a_server_setting_that_cannot_work_is_a_chronicle_error_2(sqlite_url, agents, options, named):
    with Chronicle(sqlite_url) as app:
        error = refused(lambda: app.http_app(*agents, **options))
    assert named in str(error)
    assert isinstance(error, ValueError)  # what a blank token raised before


def test_a_server_workspace_that_does_not_exist_is_refused(sqlite_url, tmp_path):
    with Chronicle(sqlite_url) as app:
        assert "is not a directory" in str(refused(lambda: app.http_app(workspace=tmp_path / "gone")))


def test_a_channels_table_that_cannot_work_is_a_chronicle_error_2_as_serve_exits_2(sqlite_url, workspace):
    (workspace / "chronicle.toml").write_text("[channels.team]\nkind = 'carrier-pigeon'\n", encoding="utf-8")
    with Chronicle(sqlite_url) as app:
        error = refused(lambda: app.http_app(workspace=workspace))
    assert "[channels.team]" in str(error)


def test_a_channel_that_could_start_no_session_is_refused_with_the_store_it_opened_closed(db_url, workspace, tmp_path):
    """The server's store is open before its per-sender channels are checked: refused, the store is closed, not left
    to the collector (which once finalised a PostgreSQL store on its own pool's thread, a warning in another test)."""
    (workspace / "chronicle.toml").write_text(
        f'[channels.a]\nroute = "per_sender"\nagent = "nobody"\nprovider = "scripted:{tmp_path / "s.json"}"\n', encoding="utf-8")
    with Chronicle(db_url) as app:
        assert "unknown agent 'nobody'" in str(refused(lambda: app.http_app(workspace=workspace)))
        assert store_leaks.open_now() == []


# -- every public method, driven by hypothesis ---------------------------------------------------------

SESSION_REFS = st.one_of(st.just(""), st.text(max_size=12), st.integers(), st.none(), st.builds(uuid.uuid4),
                         st.sampled_from(["0", "ffffffff", "not-a-session"]), st.floats(), st.lists(st.integers(), max_size=2))
NUMBERS = st.one_of(st.integers(min_value=-3, max_value=3), st.integers(min_value=10**6), st.floats(), st.text(max_size=4),
                    st.booleans())
TEXTS = st.one_of(st.text(max_size=20), st.just(""), st.just("   "), st.integers(), st.none())
PATHS = st.one_of(st.none(), st.just("/nonexistent/chronicle-ws"), st.integers(), st.text(max_size=8))


def _calls(app: Chronicle, agent: Agent, sids: list[str]) -> st.SearchStrategy:
    """(method name, a call of it with bad or odd arguments). `sids` name real sessions (one, an ambiguous prefix,
    one erased by `forget`): a method that takes a session meets them too, with its other arguments wrong."""
    ref = st.one_of(SESSION_REFS, st.sampled_from(sids))
    calls = {
        "history": st.builds(lambda s, a, v, p: lambda: app.history(s, at=a, version=v, step=p), ref, NUMBERS, NUMBERS, NUMBERS),
        "log": st.builds(lambda s, t: lambda: app.log(s, tree=t), ref, st.one_of(st.booleans(), TEXTS)),
        "undo": st.builds(lambda s, n, w: lambda: app.undo(s, turns=n, files=True, workspace=w), ref, NUMBERS, PATHS),
        "redo": st.builds(lambda s, f: lambda: app.redo(s, files=f), ref, st.one_of(st.booleans(), TEXTS)),
        "fork": st.builds(lambda s, a: lambda: app.fork(s, at=a), ref, NUMBERS),
        "steer": st.builds(lambda s, m, t: lambda: app.steer(s, m, turn=t), ref, TEXTS, st.one_of(st.none(), TEXTS)),
        "cancel": st.builds(lambda s, w: lambda: app.cancel(s, wait_s=w), ref, st.one_of(NUMBERS, st.just(-1.0))),
        "approve": st.builds(lambda s, c, a: lambda: app.approve(s, tool_call=c, always=a), ref, TEXTS, st.one_of(st.booleans(), TEXTS)),
        "deny": st.builds(lambda s, r: lambda: app.deny(s, reason=r), ref, TEXTS),
        "compact": st.builds(lambda s, k, n: lambda: app.compact(s, strategy=k, keep=n), ref,
                             st.one_of(TEXTS, st.just("truncate")), NUMBERS),
        "set_model": st.builds(lambda s, m, t: lambda: app.set_model(s, m, thinking_tokens=t), ref, TEXTS, NUMBERS),
        "model": st.builds(lambda s: lambda: app.model(s), ref),
        "archive": st.builds(lambda s: lambda: app.archive(s), ref),
        "unarchive": st.builds(lambda s: lambda: app.unarchive(s), ref),
        "tasks": st.builds(lambda s: lambda: app.tasks(s), ref),
        "add_task": st.builds(lambda s, t, a: lambda: app.add_task(s, t, agent=a), ref, TEXTS, TEXTS),
        "cost": st.builds(lambda s, b: lambda: app.cost(s, by=b), st.one_of(st.none(), ref), TEXTS),
        "audit": st.builds(lambda s, t, since, n: lambda: app.audit(session=s, tool=t, since=since, limit=n),
                           st.one_of(st.none(), ref), TEXTS, TEXTS, NUMBERS),
        "job": st.builds(lambda s: lambda: app.job(s), ref),
        "cancel_job": st.builds(lambda s: lambda: app.cancel_job(s), ref),
        "replay": st.builds(lambda s, w: lambda: app.replay(s, workspace=w), ref, PATHS),
        "resume": st.builds(lambda s, w: lambda: app.resume(s, workspace=w), ref, PATHS),
        "run_sync": st.builds(lambda p, s, n, m, a: lambda: app.run_sync(agent, p, session=s, max_iterations=n, model=m, max_attempts=a),
                              TEXTS, ref, NUMBERS, TEXTS, st.one_of(st.none(), NUMBERS)),
        "skills": st.builds(lambda w: lambda: app.skills(workspace=w), PATHS),
        "repairs": st.builds(lambda c, s, n: lambda: app.repairs(check=c, stuck_after_s=s, tool_failures=n),
                             st.one_of(st.booleans(), TEXTS), st.one_of(NUMBERS, st.just(-1.0)), NUMBERS),
        "agent_limits": st.builds(lambda limits: lambda: Agent(limits=limits), st.one_of(
            st.none(), TEXTS, NUMBERS, st.dictionaries(st.sampled_from(["budget_usd", "max_tool_calls", "doom_loop", "budget"]),
                                                       NUMBERS, max_size=2))),
        "submit": st.builds(lambda p, s, w: lambda: app.submit(agent, p, session=s, workspace=w), TEXTS, ref, PATHS),
        "submit_job": st.builds(lambda p, w, n: lambda: app.submit_job(agent, p, workspace=w, max_iterations=n), TEXTS, PATHS, NUMBERS),
        "routines": st.builds(lambda w: lambda: app.routines(workspace=w), PATHS),
        "run_routine": st.builds(lambda r, w: lambda: app.run_routine(r, workspace=w), TEXTS, PATHS),
        "routine_history": st.builds(lambda w, r: lambda: app.routine_history(workspace=w, routine=r), PATHS, TEXTS),
        "sessions": st.builds(lambda a: lambda: app.sessions(all=a), st.one_of(st.booleans(), TEXTS)),
        "http_app": st.builds(lambda t, r, c: lambda: app.http_app(token=t, run_worker=r, worker_concurrency=c),
                              TEXTS, st.one_of(st.booleans(), TEXTS), NUMBERS),
        "agent": st.builds(lambda n, i, t, m: lambda: Agent(name=n, instructions=i, tools=t, model=m),
                           st.one_of(st.just("main"), TEXTS), TEXTS, st.one_of(st.none(), st.lists(TEXTS, max_size=2), TEXTS),
                           st.one_of(st.none(), TEXTS)),
        "guardrail": st.builds(lambda n, c, on, f: lambda: Guardrail(n, c, on=on, fail=f), TEXTS, st.one_of(st.just(_check), TEXTS),
                               st.one_of(st.lists(TEXTS, max_size=2), TEXTS, st.just(["final"])), st.one_of(st.none(), TEXTS)),
        "middleware": st.builds(lambda n, u: lambda: Middleware(n, u), TEXTS, st.one_of(st.just(_around), TEXTS)),
        "timeout": st.builds(lambda n: lambda: Timeout(seconds=n), NUMBERS),
        "mcp_server": st.builds(lambda n, c, u, t: lambda: McpServer(name=n, command=c, url=u, startup_timeout_s=t),
                                TEXTS, st.one_of(st.none(), TEXTS), st.one_of(st.none(), TEXTS, st.just("http://127.0.0.1:9")), NUMBERS),
        "tool": st.builds(lambda n, t, r: lambda: tool(name=n, timeout_s=t, read_only=r)(_plain),
                          st.one_of(st.none(), TEXTS), st.one_of(st.none(), NUMBERS), st.one_of(st.booleans(), TEXTS)),
    }
    return st.sampled_from(sorted(calls)).flatmap(lambda name: st.tuples(st.just(name), calls[name]))


#: Methods that may record something when their arguments are good (a new session, a queued input, a change).
MAY_RECORD = {"run_sync", "submit", "submit_job", "undo", "redo", "fork", "steer", "cancel", "approve", "deny", "compact",
              "set_model", "archive", "unarchive", "add_task", "cancel_job", "resume", "run_routine", "repairs"}


def test_only_chronicle_errors_escape_the_public_api_and_a_refusal_records_nothing(db_url, workspace, tmp_path, monkeypatch):
    monkeypatch.chdir(workspace)  # where a call without workspace= works
    key = base64.b64encode(os.urandom(32)).decode()  # encryption at rest, so that `forget` can erase a session
    monkeypatch.setenv("CHRONICLE_CIPHER_KEY", key)
    agent = Agent(tools=[], provider=scripted(tmp_path, turns=400))
    with Chronicle(db_url) as app:
        sid = app.run_sync(agent, "hi", workspace=workspace).session_id
        others = [app.fork(sid) for _ in range(16)]  # 17 ids: two share a first digit, an ambiguous prefix
        firsts = [s[0] for s in [sid, *others]]
        prefix = next(c for c in firsts if firsts.count(c) > 1)
        assert "matches" in str(refused(lambda: app.log(prefix)))
        erased = app.run_sync(agent, "to forget", workspace=workspace).session_id
        assert cli("forget", erased, "--yes", db=db_url, env={"CHRONICLE_CIPHER_KEY": key}).returncode == 0
        app.store.mapper.keys.clock = lambda: float("inf")  # past the cached data key's `fresh_for`, as another process
        assert "was forgotten" in str(refused(lambda: app.history(erased), code=1))

        # derandomize: the same examples on every run, so CI is red only for a change (a new hole found by a
        # random draw once failed a CI run; it is a case above now). Run with a random seed to look for more.
        @settings(max_examples=250, deadline=None, database=None, suppress_health_check=list(HealthCheck), derandomize=True)
        @given(_calls(app, agent, [sid, prefix, erased, erased[:8]]))
        def only_chronicle_errors(named_call):
            name, call = named_call
            tried.append(name)
            before = app.store.max_position()
            try:
                made = call()
            except ChronicleError as exc:
                assert exc.code in (1, 2, 3) and str(exc).strip() and "\n" not in str(exc), (name, exc)
                assert app.store.max_position() == before, f"{name} refused ({exc}) yet recorded"
            else:
                if name == "http_app":
                    made.state.chronicle.close()
                assert name in MAY_RECORD or app.store.max_position() == before, f"{name} recorded"

        tried: list[str] = []
        only_chronicle_errors()
        assert len(tried) >= 100 and len(set(tried)) >= 25, sorted(set(tried))  # the methods were all met, or most
