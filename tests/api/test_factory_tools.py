"""Tools, guardrails and hooks made by a factory (closures sharing one import path): a run uses its own Agent's."""

from __future__ import annotations

import gc
import json
from dataclasses import dataclass, field

import pytest

from chronicle import Agent, Chronicle, ChronicleError, Guardrail, Hook, tool
from tests.helpers import cli, json_lines, response, text, tool_use

LEDGER: list[tuple[str, str, float]] = []


def tools_for(tenant: str) -> list:
    @tool(requires_approval=True)
    def refund(order_id: str, amount: float) -> str:
        """Refund an order."""
        LEDGER.append((tenant, order_id, amount))
        return f"refunded {amount} on {order_id} for tenant {tenant}"

    return [refund]


def redactor(word: str):
    def redact(text_: str, where: str) -> str:
        return text_.replace(word, "[gone]")

    return redact


@dataclass
class Counter(Hook):
    seen: list = field(default_factory=list)

    async def before_tool_call(self, session, turn, call):
        self.seen.append(call.name)
        return None


def script(path, *turns) -> str:
    path.write_text(json.dumps({"agents": {"main": list(turns)}}), encoding="utf-8")
    return f"scripted:{path}"


def refund_turn(order: str) -> list:
    return [response(tool_use("tu_1", "refund", order_id=order, amount=5.0)), response(text("done"))]


def outputs(db_url: str, sid: str) -> list[str]:
    log = json_lines(cli("log", sid, "--json", db=db_url).stdout)
    return [e["data"].get("output") or e["data"].get("error") for e in log
            if e["aggregate"] == "tool_call" and e["event"] in ("Completed", "Failed")]


def test_each_agent_runs_its_own_factory_made_tool_and_a_resume_runs_the_one_its_run_had(db_url, workspace, tmp_path):
    LEDGER.clear()
    acme = Agent(tools=tools_for("acme"), provider=script(tmp_path / "a.json", refund_turn("A-1")))
    app = Chronicle(db_url)
    waiting = app.run_sync(acme, "refund", workspace=str(workspace))
    assert waiting.status == "awaiting_approval"
    initech = Agent(tools=tools_for("initech"), provider=script(tmp_path / "i.json", refund_turn("I-1")))
    umbrella = Agent(tools=tools_for("umbrella"), provider=script(tmp_path / "u.json", refund_turn("U-1")))
    assert app.run_sync(initech, "refund", workspace=str(workspace), auto_approve=True).status == "completed"
    assert app.run_sync(umbrella, "refund", workspace=str(workspace), auto_approve=True).status == "completed"
    app.approve(waiting.session_id)
    assert app.resume(waiting.session_id).status == "completed"  # after two more were defined under its path
    assert sorted(LEDGER) == [("acme", "A-1", 5.0), ("initech", "I-1", 5.0), ("umbrella", "U-1", 5.0)]
    assert outputs(db_url, waiting.session_id) == ["refunded 5.0 on A-1 for tenant acme"]
    app.close()


def test_a_session_whose_agent_is_gone_is_refused_not_run_with_another_tenants_tool(sqlite_url, workspace, tmp_path):
    LEDGER.clear()
    app = Chronicle(sqlite_url)
    acme = Agent(tools=tools_for("acme"), provider=script(tmp_path / "a.json", refund_turn("A-1")))
    waiting = app.run_sync(acme, "refund", workspace=str(workspace))
    keep = tools_for("globex")  # alive, under the same path
    del acme
    gc.collect()  # the Agent the session ran with is gone: which refund it means cannot be told
    app.approve(waiting.session_id)
    with pytest.raises(ChronicleError) as refused:
        app.resume(waiting.session_id)
    assert refused.value.code == 2
    assert "tools_for.<locals>.refund': the Agent this session was run with in this process is gone" in str(refused.value)
    assert "run(agent, session=...)" in str(refused.value)
    assert LEDGER == [] and keep
    app.close()


def test_guardrails_and_hook_instances_are_the_agents_own(sqlite_url, workspace, tmp_path):
    alpha_hook, beta_hook = Counter(), Counter()
    a = Agent(tools=["read_file"], guardrails=[Guardrail("redact", redactor("hello"), on=["tool_result"])], hooks=[alpha_hook],
              provider=script(tmp_path / "a.json", [response(tool_use("tu_1", "read_file", path="hello.txt")), response(text("ok"))]))
    Agent(tools=["read_file"], guardrails=[Guardrail("redact", redactor("second"), on=["tool_result"])], hooks=[beta_hook],
          provider=script(tmp_path / "b.json", [response(text("never"))]))
    app = Chronicle(sqlite_url)
    done = app.run_sync(a, "read", workspace=str(workspace))
    assert done.status == "completed"
    (output,) = outputs(sqlite_url, done.session_id)
    assert "[gone] world" in output and "second line" in output  # A's check ran, not B's
    assert (alpha_hook.seen, beta_hook.seen) == (["read_file"], [])
    app.close()


def test_one_agent_given_two_objects_under_one_path_is_refused_where_it_is_written():
    child = Agent(name="clerk", tools=tools_for("b"))
    with pytest.raises(ChronicleError) as refused:
        Agent(tools=tools_for("a"), agents=[child])
    assert refused.value.code == 2 and "two different tools have the import path" in str(refused.value)


def test_submit_refuses_a_tool_defined_inside_a_function(sqlite_url, workspace, tmp_path):
    agent = Agent(tools=tools_for("acme"), provider=script(tmp_path / "a.json", refund_turn("A-1")))
    app = Chronicle(sqlite_url)
    for call in (lambda: app.submit(agent, "refund", workspace=str(workspace)),
                 lambda: app.submit_job(agent, "refund", workspace=str(workspace))):
        with pytest.raises(ChronicleError) as refused:
            call()
        assert refused.value.code == 2
        assert "tools_for.<locals>.refund defined inside a function, which a worker cannot import" in str(refused.value)
    assert not (tmp_path / "chronicle.db").exists()  # nothing recorded, no store made
    app.close()


def lookup_for(tenant: str):
    @tool(read_only=True)
    def lookup(order_id: str) -> str:
        """Find an order."""
        return f"{tenant}: {order_id}"

    return lookup


def test_two_live_objects_under_one_path_do_not_load_by_it_alone():
    from chronicle.runtime.tools.imports import ToolLoadError, load_tools

    first, second = lookup_for("a"), lookup_for("b")
    with pytest.raises(ToolLoadError) as refused:
        load_tools(first.import_path)
    assert "lookup_for.<locals>.lookup' names 2 different tools defined in this process" in str(refused.value)
    del first
    gc.collect()  # a @tool's class is in a reference cycle: gone at the collector's next pass
    assert load_tools(second.import_path) == [second]  # one left: no doubt which
