"""Seed 004's display prefix: an agent's emoji and label (default a robot), carried by the live `agent_start` event
(the seed's AgentEventData{Prefix, Parent}) and shown by `run` and `chat`; recorded on the agent's spec, never sent
to the model."""

from __future__ import annotations

import asyncio
import json

from chronicle import Agent, Chronicle, tool
from tests.helpers import cli, response, text, tool_use, write_script


@tool(read_only=True)
async def peek(key: str) -> str:
    """Read a value."""
    return f"value of {key}"


def _delegating(tmp_path, *agents: str):
    tasks = [{"agent": a, "task": f"peek for {a}", "context": "k is a key"} for a in agents]
    finish = [response(tool_use("h1", "peek", key="k")), response(tool_use("h2", "task_complete", status="completed", summary="read"))]
    return write_script(tmp_path / "s.json", [response(tool_use("d1", "delegate", tasks=tasks)), response(text("all done"))],
                        **{a: finish for a in agents})


def test_agent_start_carries_each_sub_agents_prefix_or_the_robot(db_url, workspace, tmp_path):
    script = _delegating(tmp_path, "researcher", "plain")
    researcher = Agent(name="researcher", description="finds things", tools=[peek], prefix="🔎 research")
    plain = Agent(name="plain", description="no prefix", tools=[peek])
    seen: list = []
    with Chronicle(db_url) as app:
        agent = Agent(tools=[peek], agents=[researcher, plain], provider=f"scripted:{script}", prefix="🛠 lead")
        done = asyncio.run(app.run(agent, "delegate", workspace=workspace, on_event=seen.append))
        assert done.status == "completed", done.reason
        starts = {e.agent: e.prefix for e in seen if e.type == "agent_start" and e.parent_session_id}
        assert starts == {"researcher": "🔎 research", "plain": "🤖"}
        assert [e.prefix for e in seen if e.type == "agent_start" and not e.parent_session_id] == ["🛠 lead"]
        sent = json.dumps(app.history(done.session_id))
        for task in app.tasks(done.session_id):
            sent += json.dumps(app.history(task["child_session_id"]))
        assert "🔎" not in sent  # display only


def test_run_shows_the_prefix_of_a_sub_agent_from_chronicle_toml(db_url, workspace, tmp_path):
    script = _delegating(tmp_path, "researcher")
    (workspace / "chronicle.toml").write_text(
        '[agents.main]\ntools = ["read_file"]\n\n[agents.researcher]\ndescription = "finds things"\nprefix = "🔎 research"\n'
        'tools = ["read_file"]\n', encoding="utf-8")
    script.write_text(script.read_text(encoding="utf-8").replace('"peek", "input": {"key": "k"}', '"read_file", "input": {"path": "hello.txt"}'),
                      encoding="utf-8")
    done = cli("run", "delegate", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert done.returncode == 0, done.stderr
    assert "↳ sub-agent 🔎 research researcher-peek-researcher-1 started" in done.stdout + done.stderr  # its instance name
    (workspace / "chronicle.toml").write_text('[agents.researcher]\nprefix = 7\n', encoding="utf-8")
    refused = cli("run", "hi", "--provider", f"scripted:{script}", "--workspace", str(workspace), db=db_url)
    assert refused.returncode == 2 and "prefix" in refused.stderr, refused.stderr
