"""Your hooks at each model call and tool call, through the public API on both backends: `Agent(hooks=[...])`
and chronicle.toml's [hooks.NAME]. A hook sees the calls in order; what it decides (stop the turn, skip a
tool) is recorded naming it, and a hook that raises fails the turn naming it. The session records its
hooks by import path, so `chronicle resume` in another process runs them; one that does not load is
refused before anything is recorded."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

import pytest

from chronicle import Agent, Chronicle, ChronicleError, Hook, NeedApproval, Skip, Stop, tool
from tests.e2e.test_cli_subagents import complete, delegate
from tests.helpers import cli, json_lines, recorded_sessions, response, text, tool_use


@tool(read_only=True)
async def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


class CountCalls(Hook):
    """Writes down each model call and tool call it sees, in order."""

    def __init__(self) -> None:
        self.seen: list[str] = []

    async def before_model_call(self, session, turn, request):
        self.seen.append(f"before_model:{request.call_index}")

    async def after_model_call(self, session, turn, response):
        self.seen.append(f"after_model:{response.stop_reason}")

    async def before_tool_call(self, session, turn, call):
        self.seen.append(f"before_tool:{call.name}:{call.input['key']}")

    async def after_tool_call(self, session, turn, call):
        self.seen.append(f"after_tool:{call.name}:{call.status}")


@dataclass
class NoSecrets(Hook):
    """Stops the turn before a lookup of `forbidden`; its options are its fields."""

    forbidden: str = "secret"
    name = "no_secrets"

    async def before_tool_call(self, session, turn, call):
        if call.input.get("key") == self.forbidden:
            return Stop(reason=f"{call.name} of {self.forbidden!r} is not allowed")
        return None


class SkipOdd(Hook):
    async def before_tool_call(self, session, turn, call):
        return Skip("odd keys are not looked up") if call.input["key"].endswith("1") else None


class AskFirst(Hook):
    async def before_tool_call(self, session, turn, call):
        return NeedApproval(f"{call.name} needs a person today")


@dataclass
class Broken(Hook):
    seen: list[str] = field(default_factory=list)

    async def after_model_call(self, session, turn, response):
        raise KeyError("oops")


def scripted(tmp_path, *turns: Any) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": list(turns)}}), encoding="utf-8")
    return f"scripted:{path}"


def two_lookups(*keys: str) -> list[dict[str, Any]]:
    return [response(*(tool_use(f"t{i}", "lookup", key=k) for i, k in enumerate(keys))), response(text("done"))]


def test_a_hook_sees_each_model_call_and_tool_call_in_order(db_url, workspace, tmp_path):
    counter = CountCalls()
    agent = Agent(tools=[lookup], provider=scripted(tmp_path, two_lookups("a", "b")), hooks=[counter])
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "look", workspace=workspace)
        assert (result.status, result.text) == ("completed", "done")
        [started] = [e for e in app.log(result.session_id) if e["event"] == "Started" and e["aggregate"] == "session"]
        assert started["data"]["spec"]["hooks"] == [{"name": "countcalls", "use": f"{__name__}:CountCalls", "options": {}}]
    assert counter.seen == [
        "before_model:0", "after_model:tool_use",
        "before_tool:lookup:a", "after_tool:lookup:completed", "before_tool:lookup:b", "after_tool:lookup:completed",
        "before_model:1", "after_model:end_turn",
    ]


def test_a_hook_that_stops_the_turn_before_a_tool_is_recorded_by_name(db_url, workspace, tmp_path):
    agent = Agent(tools=[lookup], provider=scripted(tmp_path, two_lookups("a", "secret")), hooks=[NoSecrets()])
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "look", workspace=workspace)
        assert (result.status, result.exit_code) == ("stopped", 4)
        assert result.reason == "hook no_secrets: lookup of 'secret' is not allowed"
        [stopped] = [e for e in app.log(result.session_id) if e["event"] == "Stopped"]
        assert stopped["data"]["guard"] == "hook:no_secrets"
        rows = {(r["kind"], r["name"]): r for r in app.audit(session=result.session_id)}
        assert rows[("guard_stop", None)]["detail"] == {"reason": result.reason, "guard": "hook:no_secrets"}
        calls = [(r["status"]) for r in app.audit(session=result.session_id) if r["kind"] == "tool_call"]
        assert calls == ["completed", "skipped"], "the first lookup ran; the stopped one did not"


def test_a_hook_may_skip_a_tool_call_and_the_turn_goes_on(db_url, workspace, tmp_path):
    agent = Agent(tools=[lookup], provider=scripted(tmp_path, two_lookups("k0", "k1")), hooks=[SkipOdd()])
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "look", workspace=workspace)
        assert result.status == "completed"
        skipped = [e["data"]["reason"] for e in app.log(result.session_id) if e["event"] == "Skipped"]
        assert skipped == ["skipped by hook skipodd: odd keys are not looked up"]


def test_a_hook_may_require_approval_which_yes_does_not_give_and_the_request_names_it(db_url, workspace, tmp_path):
    agent = Agent(tools=[lookup], provider=scripted(tmp_path, two_lookups("a")), hooks=[AskFirst()])
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "look", workspace=workspace, auto_approve=True)
        assert (result.status, result.exit_code) == ("awaiting_approval", 3)
        [asked] = [r for r in app.audit(session=result.session_id) if r["kind"] == "approval_requested"]
        assert asked["detail"]["reason"] == "hook askfirst: lookup needs a person today"
        app.approve(result.session_id)
        assert app.resume(result.session_id).status == "completed"


def test_a_hook_that_raises_fails_the_turn_naming_it(db_url, workspace, tmp_path):
    agent = Agent(tools=[lookup], provider=scripted(tmp_path, two_lookups("a")), hooks=[Broken()])
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "look", workspace=workspace)
        assert (result.status, result.reason) == ("failed", "hook broken: after_model_call raised KeyError: 'oops'")
        [failure] = [r for r in app.audit(session=result.session_id) if r["kind"] == "failure"]
        assert failure["detail"]["error"] == {"hook": "broken", "kind": "error"}
        assert [r["status"] for r in app.audit(session=result.session_id) if r["kind"] == "tool_call"] == ["skipped"]


def test_a_hook_in_chronicle_toml_runs_through_chronicle_run(db_url, workspace, tmp_path):
    (workspace / "my_hooks.py").write_text(
        "from chronicle import Hook, Stop\n"
        "class Quota(Hook):\n"
        "    def __init__(self, tools):\n"
        "        self.tools, self.used = tools, 0\n"
        "    async def before_tool_call(self, session, turn, call):\n"
        "        self.used += 1\n"
        "        return Stop(reason=f'quota of {self.tools} tool call(s) used') if self.used > self.tools else None\n",
        encoding="utf-8")
    (workspace / "chronicle.toml").write_text('[hooks.quota]\nuse = "my_hooks:Quota"\noptions = { tools = 0 }\n', encoding="utf-8")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [two_lookups("a")]}}), encoding="utf-8")
    ran = cli("run", "look", "--provider", f"scripted:{script}", "--workspace", str(workspace), "--json", db=db_url)
    assert ran.returncode == 4, ran.stderr
    end = next(e for e in json_lines(ran.stdout) if e["type"] == "turn_end")
    assert (end["status"], end["reason"]) == ("stopped", "hook quota: quota of 0 tool call(s) used")


def test_a_session_with_an_agent_hook_runs_it_when_resumed_in_another_process(db_url, workspace, tmp_path):
    agent = Agent(tools=[lookup], provider=scripted(tmp_path, two_lookups("secret")), hooks=[NoSecrets()])
    with Chronicle(db_url) as app:
        sid = app.submit(agent, "look", workspace=workspace)["session_id"]
    done = cli("resume", sid, "--json", db=db_url)
    assert done.returncode == 4, done.stderr
    end = next(e for e in json_lines(done.stdout) if e["type"] == "turn_end")
    assert (end["status"], end["reason"]) == ("stopped", "hook no_secrets: lookup of 'secret' is not allowed")


def test_a_hook_that_does_not_load_is_refused_before_anything_is_recorded(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text('[hooks.gone]\nuse = "nowhere_hooks:Gone"\n', encoding="utf-8")
    script = tmp_path / "s.json"
    script.write_text(json.dumps({"agents": {"main": [[response(text("never"))]]}}), encoding="utf-8")
    ran = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert ran.returncode == 2, ran.stderr
    assert "cannot load hook 'nowhere_hooks:Gone'" in ran.stderr and "\n" not in ran.stderr.strip()
    with Chronicle(db_url) as app:
        with pytest.raises(ChronicleError) as raised:
            app.run_sync(Agent(tools=[], provider=f"scripted:{script}"), "hi", workspace=workspace)
        assert raised.value.code == 2 and "cannot load hook 'nowhere_hooks:Gone'" in str(raised.value)
        assert recorded_sessions(app) == []


def test_bad_hooks_are_refused_when_the_agent_is_defined():
    with pytest.raises(TypeError, match="hooks= takes chronicle.Hook subclasses"):
        Agent(hooks=[lambda: None])
    with pytest.raises(ValueError, match="two hooks have the same name"):
        Agent(hooks=[NoSecrets(), NoSecrets("other")])
    with pytest.raises(ValueError, match="Stop needs a reason"):
        Stop("only a guard")


class SeesAll(Hook):
    def __init__(self) -> None:
        self.seen: list[str] = []

    async def before_tool_call(self, session, turn, call):
        self.seen.append(f"{session.spec.name}:{call.name}")


class NoSecretFile(Hook):
    async def before_tool_call(self, session, turn, call):
        return Skip("secret.txt stays closed") if call.input.get("path") == "secret.txt" else None


def test_a_sub_agent_runs_its_parents_hooks_then_its_own(db_url, workspace, tmp_path):
    (workspace / "secret.txt").write_text("pw", encoding="utf-8")
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {
        "lead": [response(delegate("d1", ("reader", "read secret.txt"))), response(text("lead is done"))],
        "reader": [response(tool_use("r1", "read_file", path="secret.txt")), response(complete("r2", "it is closed"))],
    }}), encoding="utf-8")
    seen = SeesAll()
    reader = Agent(name="reader", description="reads files", tools=["read_file"], hooks=[NoSecretFile()])
    agent = Agent(name="lead", tools=["read_file"], agents=[reader], provider=f"scripted:{path}", hooks=[seen])
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "read it", workspace=workspace)
        assert (result.status, result.text) == ("completed", "lead is done")
        skipped = [e["data"]["reason"] for e in app.log(result.session_id, tree=True) if e["event"] == "Skipped"]
    assert skipped == ["skipped by hook nosecretfile: secret.txt stays closed"]
    assert seen.seen == ["lead:delegate", "reader:read_file", "reader:task_complete"], "the parent's hook sees the whole tree"


def test_a_question_a_hook_asked_stays_for_a_person_after_the_process_that_asked_it_is_gone(db_url, workspace, tmp_path):
    """The hook's question is recorded with the call (`ApprovalRequested.reason`), so a later process, a
    resume with --yes, the session's approval policy or a worker cannot answer it in a person's stead."""
    agent = Agent(tools=[lookup], provider=scripted(tmp_path, two_lookups("a")), hooks=[AskFirst()],
                  approvals={"policy": "allow"})
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "look", workspace=workspace)
        assert (result.status, result.exit_code) == ("awaiting_approval", 3), "the policy does not answer a hook's question"
    with Chronicle(db_url) as app:  # a process that did not see the hook ask
        again = app.resume(result.session_id, auto_approve=True)
        assert (again.status, again.exit_code) == ("awaiting_approval", 3), "--yes does not answer a hook's question"
        assert not [e for e in app.log(result.session_id) if e["event"] == "Approved"]
    from chronicle.runtime.session_work import needs_work
    from chronicle.runtime.store import open_store_at

    store = open_store_at(db_url)
    try:
        session = store.session(UUID(str(result.session_id)))
        assert needs_work(store, session) is None and needs_work(store, session, auto_approve=True) is None, \
            "a worker leaves a hook's question to a person, with or without --yes"
    finally:
        store.close()
    with Chronicle(db_url) as app:
        app.approve(result.session_id)
        assert app.resume(result.session_id).status == "completed"
