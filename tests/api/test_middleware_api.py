"""Middleware around a run, through the public API on both backends: `Agent(middleware=[...])` and
chronicle.toml's [middleware.NAME] wrap each run; what a middleware decides (a timeout that stopped the
run, a refusal, a recorded decision, a bug in it) is an event in the log and a row in `audit`, and the
session records its middleware by import path, so `chronicle resume` in another process applies them."""

from __future__ import annotations

import asyncio
import json

import pytest

from chronicle import Agent, Chronicle, ChronicleError, Middleware, RunFailed, Timeout, tool
from tests.helpers import cli, json_lines, recorded_sessions, response, text, tool_use


@tool(read_only=True)
async def wait_a_long_time() -> str:
    """Wait far longer than any test would."""
    await asyncio.sleep(60)
    return "never"


async def count_words(run, call_next):
    run.record("input_measured", words=len(run.input.split()))
    outcome = await call_next()
    run.record("run_ended", status=outcome.status)
    return outcome


async def office_hours(run, call_next):
    if "night" in run.input:
        raise RunFailed("closed at night", kind="refused")
    return await call_next()


async def broken(run, call_next):
    raise KeyError("oops")


#: A token a middleware's exception repeats (a client library's error often does): never recorded.
LEAKED = "ghp_" + "Zr8Kq2Lm9Nx4Vb7Tc1Hd6Jf3Gs5Pw0Ya8Eu2"


async def leaky(run, call_next):
    raise PermissionError(f"vault refused token {LEAKED}")


async def forgetful(run, call_next):
    return None


def scripted(tmp_path, *turns):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": list(turns)}}), encoding="utf-8")
    return f"scripted:{path}"


def test_a_timeout_interrupts_the_run_and_the_turn_fails_naming_it(db_url, workspace, tmp_path):
    provider = scripted(tmp_path, [response(tool_use("t1", "wait_a_long_time")), response(text("unreachable"))])
    agent = Agent(tools=[wait_a_long_time], provider=provider, middleware=[Timeout(seconds=0.5)])
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "wait", workspace=workspace)
        assert (result.status, result.exit_code) == ("failed", 1)
        assert result.reason == "middleware timeout: the run took longer than 0.5 s"
        [failure] = [r for r in app.audit(session=result.session_id) if r["kind"] == "failure"]
        assert failure["detail"]["error"] == {"middleware": "timeout", "kind": "timeout"}
        [call] = [r for r in app.audit(session=result.session_id) if r["kind"] == "tool_call"]
        assert call["status"] == "cancelled"
        cancelled = [e for e in app.log(result.session_id) if e["event"] == "Cancelled" and e["aggregate"] == "tool_call"]
        assert [e["data"]["reason"] for e in cancelled] == [result.reason], "the call says why it was cancelled"
        [started] = [e for e in app.log(result.session_id) if e["event"] == "Started" and e["aggregate"] == "session"]
        assert started["data"]["spec"]["middleware"] == [
            {"name": "timeout", "use": "chronicle.runtime.middleware:Timeout", "options": {"seconds": 0.5}}]


def test_decisions_a_middleware_records_are_audited_and_a_refusal_fails_the_turn(db_url, workspace, tmp_path):
    agent = Agent(tools=[], provider=scripted(tmp_path, [response(text("hello"))]), middleware=[count_words, office_hours])
    with Chronicle(db_url) as app:
        first = app.run_sync(agent, "say hello please", workspace=workspace)
        assert (first.status, first.text) == ("completed", "hello")
        second = app.run_sync(agent, "good night", session=first.session_id)
        assert (second.status, second.reason) == ("failed", "middleware office_hours: closed at night")
        rows = [(r["kind"], r["name"], r["status"], r["detail"]) for r in app.audit(session=first.session_id)
                if r["kind"] in ("middleware", "failure")]
    assert rows == [
        ("middleware", "count_words", "input_measured", {"words": 3}),
        ("middleware", "count_words", "run_ended", {"status": "completed"}),
        ("middleware", "count_words", "input_measured", {"words": 2}),
        ("failure", None, "failed", {"reason": "middleware office_hours: closed at night",
                                     "error": {"middleware": "office_hours", "kind": "refused"}}),
        ("middleware", "count_words", "run_ended", {"status": "failed"}),
    ]


def test_a_broken_middleware_fails_the_turn_with_what_it_raised(db_url, workspace, tmp_path):
    agent = Agent(tools=[], provider=scripted(tmp_path, [response(text("hi"))], [response(text("hi"))]),
                  middleware=[Middleware("bug", broken), forgetful])
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "hi", workspace=workspace)
        assert (result.status, result.reason) == ("failed", "middleware bug: raised KeyError: 'oops'")
    agent = Agent(tools=[], provider=scripted(tmp_path, [response(text("hi"))]), middleware=[forgetful])
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "hi", workspace=workspace)
        assert result.status == "failed"
        assert result.reason == "middleware forgetful: returned without running the turn; await call_next(), or raise RunFailed"


def test_a_secret_in_what_a_middleware_raised_is_cut_from_the_failed_turns_reason(db_url, workspace, tmp_path):
    agent = Agent(tools=[], provider=scripted(tmp_path, [response(text("hi"))]), middleware=[Middleware("vault", leaky)])
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "hi", workspace=workspace)
        assert result.status == "failed" and LEAKED not in (result.reason or "")
        assert result.reason == "middleware vault: raised PermissionError: vault refused token [REDACTED:github-token]"
        logged = json.dumps(app.log(result.session_id))
        assert LEAKED not in logged and "[REDACTED:github-token]" in logged


def test_chronicle_toml_middleware_wraps_runs_and_a_recorded_one_applies_in_another_process(db_url, workspace, tmp_path):
    (workspace / "audit_mw.py").write_text(
        "async def stamp(run, call_next):\n"
        "    run.record('stamped', agent=run.agent)\n"
        "    return await call_next()\n", encoding="utf-8")
    (workspace / "chronicle.toml").write_text('[middleware.stamp]\nuse = "audit_mw:stamp"\n', encoding="utf-8")
    provider = scripted(tmp_path, [response(tool_use("t1", "wait_a_long_time")), response(text("unreachable"))])
    agent = Agent(tools=[wait_a_long_time], provider=provider, middleware=[Middleware("deadline", Timeout, {"seconds": 0.5})])
    with Chronicle(db_url) as app:
        sid = app.submit(agent, "wait", workspace=workspace)["session_id"]
    done = cli("resume", sid, "--json", db=db_url)
    assert done.returncode == 1, done.stderr
    end = next(e for e in json_lines(done.stdout) if e["type"] == "turn_end")
    assert (end["status"], end["reason"]) == ("failed", "middleware deadline: the run took longer than 0.5 s")
    with Chronicle(db_url) as app:
        rows = [(r["kind"], r["name"], r["status"]) for r in app.audit(session=sid) if r["kind"] in ("middleware", "failure")]
    assert rows == [("middleware", "stamp", "stamped"), ("failure", None, "failed")]


def test_middleware_that_does_not_load_is_refused_before_anything_is_recorded(db_url, workspace, tmp_path):
    agent = Agent(tools=[], provider=scripted(tmp_path, [response(text("hi"))]), middleware=[Middleware("gone", "tests.api.nowhere:mw")])
    with Chronicle(db_url) as app:
        with pytest.raises(ChronicleError) as raised:
            app.run_sync(agent, "hi", workspace=workspace)
        assert raised.value.code == 2
        assert "cannot load middleware 'tests.api.nowhere:mw'" in str(raised.value)
        assert recorded_sessions(app) == []


def test_bad_middleware_is_refused_when_the_agent_is_defined():
    with pytest.raises(TypeError, match="middleware= takes Middleware objects"):
        Agent(middleware=["timeout"])
    with pytest.raises(ValueError, match="two middleware have the same name"):
        Agent(middleware=[Timeout(1), Timeout(2)])
    with pytest.raises(ValueError, match="seconds must be a positive number"):
        Timeout(0)
