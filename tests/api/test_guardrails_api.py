"""Guardrails given in code: `Agent(guardrails=[...])` passes, changes or rejects, on both backends, and
the session records them by import path, so `chronicle resume` in another process applies them too."""

from __future__ import annotations

import json

import pytest

from chronicle import Agent, Chronicle, ChronicleError, Guardrail, Rejected
from tests.helpers import cli, json_lines, recorded_sessions, response, text, tool_use


def redact_hello(text: str, where: str) -> str | None:
    return text.replace("hello world", "[redacted]") if "hello world" in text else None


def no_passwords(text: str, where: str) -> None:
    if "password" in text.lower():
        raise Rejected("mentions a password")


def stamp(text: str, where: str) -> str:
    return text + " (checked)"  # changes every text it is shown: applied twice, it shows


def scripted(tmp_path, turns):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": turns}}), encoding="utf-8")
    return f"scripted:{path}"


def test_an_agents_guardrails_change_a_tool_result_and_reject_a_final_answer(db_url, workspace, tmp_path):
    provider = scripted(tmp_path, [
        [response(tool_use("t1", "read_file", path="hello.txt")), response(text("It says [redacted]."))],
        [response(text("The password is hunter2."))],
    ])
    agent = Agent(tools=["read_file"], provider=provider,
                  guardrails=[Guardrail("redact", redact_hello, on=["tool_result"]), no_passwords])
    with Chronicle(db_url) as app:
        first = app.run_sync(agent, "read hello.txt", workspace=workspace)
        assert first.status == "completed"
        assert "hello world" not in json.dumps(app.log(first.session_id))
        second = app.run_sync(agent, "and the secret?", session=first.session_id)
        assert (second.status, second.exit_code) == ("failed", 1)
        assert second.reason == "guardrail no_passwords rejected the final answer: mentions a password"
        [started] = [e for e in app.log(first.session_id) if e["event"] == "Started" and e["aggregate"] == "session"]
        assert started["data"]["spec"]["guardrails"] == [
            {"name": "redact", "check": "tests.api.test_guardrails_api:redact_hello", "on": ["tool_result"], "fail": "closed"},
            {"name": "no_passwords", "check": "tests.api.test_guardrails_api:no_passwords",
             "on": ["inbound", "tool_result", "final"], "fail": "closed"},
        ]


def test_replay_checks_a_rerun_tool_result_as_the_run_did_and_still_names_a_file_that_changed(db_url, workspace, tmp_path):
    (workspace / "secret.txt").write_text("password: swordfish\n", encoding="utf-8")
    provider = scripted(tmp_path, [[
        response(tool_use("t1", "read_file", path="hello.txt"), tool_use("t2", "read_file", path="secret.txt")),
        response(tool_use("w1", "write_file", path="notes.txt", content="noted")), response(text("done")),
    ]])
    checks = [Guardrail("redact", redact_hello, on=["tool_result"]), Guardrail("stamp", stamp, on=["tool_result"]),
              Guardrail("no_passwords", no_passwords, on=["tool_result"])]
    with Chronicle(db_url) as app:
        sid = app.run_sync(Agent(tools=["read_file", "write_file"], provider=provider, guardrails=checks), "read",
                           workspace=workspace).session_id
        read, refused, _ = (e["data"]["output"] for e in app.log(sid) if e["event"] in ("Completed", "Failed") and e["aggregate"] == "tool_call")
        assert read.startswith("[redacted]") and read.endswith(" (checked)")
        assert refused == "guardrail no_passwords rejected the result of read_file: mentions a password"

        # the re-run reads are checked once, as the run checked them; the writer's recorded result is not checked again
        same = app.replay(sid)
        assert same["identical"] is True, same["verdict"]
        assert (same["rechecked"], same["reused"]) == (2, 1)

        (workspace / "hello.txt").write_text("goodbye world\n", encoding="utf-8")
        changed = app.replay(sid)
        assert changed["divergence"] == {"turn": 1, "step": 0, "kind": "tool result",
                                         "detail": "read_file (t1) returned 'goodbye world (checked)', recorded '[redacted]⏎second line (checked)'"}


def test_a_check_that_does_not_load_is_refused_before_anything_is_recorded(db_url, workspace, tmp_path):
    agent = Agent(tools=[], provider=scripted(tmp_path, [[response(text("hi"))]]),
                  guardrails=[Guardrail("gone", "tests.api.nowhere:check")])
    with Chronicle(db_url) as app:
        with pytest.raises(ChronicleError) as raised:
            app.run_sync(agent, "hi", workspace=workspace)
        assert raised.value.code == 2
        assert "cannot load check 'tests.api.nowhere:check': No module named 'tests.api.nowhere'" in str(raised.value)
        assert recorded_sessions(app) == []


def test_a_final_answer_changed_in_another_process_is_audited(db_url, workspace, tmp_path):
    provider = scripted(tmp_path, [[response(text("I found hello world."))]])
    agent = Agent(tools=[], provider=provider, guardrails=[Guardrail("redact", redact_hello, on=["final"])])
    with Chronicle(db_url) as app:
        sid = app.submit(agent, "find it", workspace=workspace)["session_id"]
    done = cli("resume", sid, "--json", db=db_url)
    assert done.returncode == 0, done.stderr
    assert next(e for e in json_lines(done.stdout) if e["type"] == "turn_end")["text"] == "I found [redacted]."
    with Chronicle(db_url) as app:
        [row] = [r for r in app.audit(session=sid) if r["kind"] == "guardrail"]
    assert (row["name"], row["status"], row["detail"]["where"], row["detail"]["text"]) == ("redact", "modified", "final", "I found [redacted].")


def test_bad_guardrails_are_refused_when_the_agent_is_defined():
    with pytest.raises(ValueError, match="on must list some of inbound, tool_result, final"):
        Agent(guardrails=[Guardrail("x", redact_hello, on=["outbound"])])
    with pytest.raises(TypeError, match="guardrails= takes Guardrail objects or check functions"):
        Agent(guardrails=["redact"])
    with pytest.raises(ValueError, match="two guardrails have the same name"):
        Agent(guardrails=[redact_hello, Guardrail("redact_hello", no_passwords)])
