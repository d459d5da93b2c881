"""`Agent(approvals=..., doom_loop=...)` through the public API on both backends, per-agent `[agents.NAME.approvals]`
tables, and stores recorded before the policy existed, which keep deciding as they did: the tools' flags, a person
asked, a doom loop at 3."""

from __future__ import annotations

import json

import pytest

from chronicle import Agent, Chronicle, tool
from chronicle.domain.agent_spec import AgentSpec
from chronicle.domain.approval_policy import ApprovalPolicy
from chronicle.runtime.agents.registry import RegistryError, child_spec, load_registry
from chronicle.runtime.limit_flags import LimitFlags
from chronicle.runtime.settings import load_settings
from chronicle.runtime.store import ChronicleStore
from tests.helpers import cli, response, text, tool_use, write_script
from tests.integration.test_old_stores import S1, old_url, version  # noqa: F401 - fixtures of the old stores


@tool(requires_approval=True)
async def launch(target: str) -> str:
    """Launch something that needs a person's yes."""
    return f"launched {target}"


@tool(read_only=True)
async def peek(key: str) -> str:
    """Read a value."""
    return f"value of {key}"


def scripted(tmp_path, *turns) -> str:
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"agents": {"main": list(turns)}}), encoding="utf-8")
    return f"scripted:{path}"


def spec_of(app: Chronicle, sid: str) -> dict:
    [started] = [e for e in app.log(sid) if e["event"] == "Started" and e["aggregate"] == "session"]
    return started["data"]["spec"]


def test_agent_approvals_deny_is_recorded_and_denies_without_asking(db_url, workspace, tmp_path):
    agent = Agent(tools=[launch], approvals={"policy": "deny"},
                  provider=scripted(tmp_path, response(tool_use("t1", "launch", target="moon")), response(text("stayed home"))))
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "go", workspace=workspace)
        assert (result.status, result.text) == ("completed", "stayed home")
        assert spec_of(app, result.session_id)["approvals"]["source"] == "Agent(main, approvals=...)"
        [denied] = [r for r in app.audit(session=result.session_id) if r["kind"] == "approval"]
        assert denied["status"] == "denied" and denied["detail"]["by"] == "policy"
        assert "Agent(main, approvals=...)" in denied["detail"]["reason"]


def test_agent_approvals_require_pauses_a_read_only_tool_and_the_library_resume_decides_by_the_record(db_url, workspace, tmp_path):
    agent = Agent(tools=[peek], approvals={"require": ["peek"]},
                  provider=scripted(tmp_path, response(tool_use("t1", "peek", key="k")), response(text("peeked"))))
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "go", workspace=workspace)
        assert (result.status, result.exit_code) == ("awaiting_approval", 3)
        assert app.resume(result.session_id).status == "awaiting_approval"
        app.approve(result.session_id)
        assert app.resume(result.session_id).status == "completed"


def test_agent_doom_loop_2_is_recorded_and_stops_the_second_identical_call(db_url, workspace, tmp_path):
    same = [response(tool_use(f"t{i}", "peek", key="k")) for i in range(3)]
    agent = Agent(tools=[peek], doom_loop=2, provider=scripted(tmp_path, *same, response(text("never"))))
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "go", workspace=workspace)
        assert (result.status, result.exit_code) == ("stopped", 4)
        assert "peek called 2 times in a row" in (result.reason or "") and "Agent(doom_loop=...)" in (result.reason or "")
        assert spec_of(app, result.session_id)["limits"]["doom_loop"] == 2


def test_agent_doom_loop_0_turns_the_guard_off_and_a_flag_value_would_win(db_url, workspace, tmp_path):
    same = [response(tool_use(f"t{i}", "peek", key="k")) for i in range(4)]
    agent = Agent(tools=[peek], doom_loop=0, provider=scripted(tmp_path, *same, response(text("four peeks"))))
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "go", workspace=workspace)
        assert (result.status, result.text) == ("completed", "four peeks")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"approvals": {"policy": "sometimes"}}, "agent main: approvals.policy: expected one of ask, deny, allow"),
    ({"approvals": {"deny": ["bash"]}}, "agent main: approvals.deny: unknown key; allowed: policy, require, allow"),
    ({"approvals": ["bash"]}, "agent main: approvals must be a table"),
    ({"doom_loop": -1}, "agent main: doom_loop takes a whole number ≥ 0"),
    ({"doom_loop": True}, "agent main: doom_loop takes a whole number ≥ 0"),
])
def test_a_bad_agent_policy_or_threshold_is_a_value_error_naming_the_field(kwargs, message):
    with pytest.raises(ValueError) as raised:
        Agent(**kwargs)
    assert str(raised.value).startswith(message)


def test_a_sub_agent_with_a_doom_loop_is_refused_since_it_runs_under_its_parents_guards():
    with pytest.raises(ValueError, match="doom_loop is set on the top-level agent"):
        Agent(agents=[Agent(name="helper", doom_loop=2)]).registry()


def test_per_agent_approvals_tables_override_the_shared_one_and_a_sub_agent_without_one_inherits(tmp_path):
    path = tmp_path / "chronicle.toml"
    path.write_text('[approvals]\npolicy = "deny"\n\n[agents.main]\n\n[agents.scout.approvals]\nallow = ["bash"]\n\n'
                    '[agents.reader]\ndescription = "reads"\n', encoding="utf-8")
    registry = load_registry(path)
    assert registry.main.approvals == ApprovalPolicy(policy="deny", source="chronicle.toml [approvals]")
    scout, reader = registry.agents
    assert scout.approvals == ApprovalPolicy(allow=("bash",), source="chronicle.toml [agents.scout.approvals]")
    assert reader.approvals == registry.main.approvals
    coded = child_spec(AgentSpec(approvals=ApprovalPolicy(policy="allow")), AgentSpec(name="helper"))
    assert coded.approval_policy.policy == "allow"
    path.write_text("[agents.scout.approvals]\nrequire = [1]\n", encoding="utf-8")
    with pytest.raises(RegistryError, match=r"agents.scout.approvals.require: 1 is not a tool name"):
        load_registry(path)


def test_the_policy_decides_allow_before_policy_and_leaves_flagged_calls_to_the_flag():
    policy = ApprovalPolicy(policy="deny", require=("write_file",), allow=("bash",), source="here")
    assert policy.requires("write_file", flagged=False) and policy.requires("bash", flagged=True)
    assert not policy.requires("read_file", flagged=False)
    assert policy.decide("bash") == ("approve", "bash is in the approval policy's allow list (here)")
    assert policy.decide("write_file")[0] == "deny"
    assert ApprovalPolicy().decide("bash") is None


def test_an_old_session_keeps_asking_a_person_and_a_doom_loop_of_3_whatever_chronicle_toml_says_now(
        old_url, version, workspace, tmp_path):  # noqa: F811 - the fixtures imported above
    store = ChronicleStore(old_url)
    spec = store.session(S1[version]).spec
    store.close()
    assert spec.approvals is None and spec.approval_policy == ApprovalPolicy()
    (workspace / "chronicle.toml").write_text('[approvals]\npolicy = "allow"\n\n[limits]\ndoom_loop = 5\n', encoding="utf-8")
    if spec.limits is not None:  # recorded limits (v2): the file only tightens them, and 3 was the fixed threshold then
        assert load_settings(LimitFlags(), workspace, spec.limits).doom_loop == 3
    script = write_script(tmp_path / "more.json", [response(tool_use("tu_9", "bash", command="echo no > no.txt")), response(text("after"))])
    run = cli("run", "shell", "--session", str(S1[version]), "--provider", f"scripted:{script}", "--workspace", str(workspace),
              "--json", db=old_url)
    assert run.returncode == 3, run.stderr  # the file's "allow" is not this session's policy: a person is asked
    assert not (workspace / "no.txt").exists()


def test_an_agent_in_code_without_a_policy_takes_the_workspace_s_approvals_table(db_url, workspace, tmp_path):
    (workspace / "chronicle.toml").write_text('[approvals]\nallow = ["launch"]\n', encoding="utf-8")
    agent = Agent(tools=[launch], provider=scripted(tmp_path, response(tool_use("t1", "launch", target="moon")), response(text("up"))))
    with Chronicle(db_url) as app:
        result = app.run_sync(agent, "go", workspace=workspace)
        assert (result.status, result.text) == ("completed", "up")
        [approved] = [r for r in app.audit(session=result.session_id) if r["kind"] == "approval"]
        assert approved["detail"]["reason"] == "launch is in the approval policy's allow list (chronicle.toml [approvals])"
